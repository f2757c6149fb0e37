package engine

import (
	"time"

	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// dispatcher is the scratch state of dispatch, reused from one event to
// the next. Only the dispatcher goroutine touches it, one event at a time.
type dispatcher struct {
	event *Event
	now   int64       // when the dispatch began, in unix nanoseconds
	lists [][]*Stream // exact and "*" subscribers
	// cands holds the candidate patterns of each topic in turn:
	// cands[ends[i-1]:ends[i]] are those of topics[i].
	cands []index.Candidate[*Stream]
	// topics are the event's topics that parse as URLs, resolved once
	// per event: patterns test their components without parsing them
	// again.
	topics  []*topicurl.URL
	ends    []int
	matched [][]*Stream
	seen    map[*index.Group[*Stream]]bool // verdicts, with several topics
	kicked  []*Stream
	woken   []*Stream // streams with events queued since the last wake
	// delivered counts this dispatch's deliveries and bytes, added to the
	// counters once at its end: one atomic add per dispatch, not per
	// delivery.
	delivered uint64
	bytes     int64
}

// dispatch hands ev to every matching stream.
//
// The engine's lock is held only to look the index up: the lists it
// returns stay as they were until the dispatch ends (see
// [index.Index.BeginRead]), so that opening and closing streams never
// waits for a fan-out, nor for URL patterns to be evaluated (MAT-9: a
// pattern costs time). A stream registered after the look-up misses ev,
// which its replay covers: ev was recorded before the look-up, so before
// the replay began. A stream that closed since gets ev in a queue it no
// longer reads.
//
// Topics are resolved as URLs only once a pattern has been registered
// (e.patternsUsed). One registered between that check and the look-up
// misses ev without harm, for the same reason: ev was recorded before.
func (e *Engine) dispatch(ev *Event) {
	e.counters.Dispatched.Add(1) // before any stream has it: stats never lag a client
	start := time.Now()
	d := &e.dispatcher
	d.event, d.now = ev, start.UnixNano()
	var urls []topicurl.URL
	if e.patternsUsed.Load() {
		urls = ev.URLs(e.resolver) // resolved once per event, not per pattern
	}
	e.mu.Lock()
	read := e.index.BeginRead()
	d.lists = e.index.Exact(read, ev.Topics, d.lists)
	if e.index.HasPatterns() {
		for i := range urls {
			u := &urls[i]
			if u.Href == "" {
				continue // MAT-8: an unparsable topic never matches a pattern
			}
			d.cands = e.index.Candidates(read, u, d.cands)
			d.topics = append(d.topics, u)
			d.ends = append(d.ends, len(d.cands))
		}
	}
	e.mu.Unlock()

	// Exact and "*" subscribers first: they need no evaluation.
	for _, l := range d.lists {
		for _, s := range l {
			e.deliver(s)
		}
		if e.stopped() {
			break // the streams are ending: a long fan-out ends too
		}
	}
	if len(d.cands) > 0 {
		// Patterns cost time (MAT-9): the subscribers that need no
		// evaluation do not wait for it.
		e.wake()
		e.evaluate()
		for _, l := range d.matched {
			for _, s := range l {
				e.deliver(s)
			}
			if e.stopped() {
				break
			}
		}
	}
	e.index.EndRead(read)
	if d.delivered > 0 {
		// Writers release what they write: until this charge, the count
		// may dip below what is queued, by this one dispatch at most.
		e.charge(ev, int(d.delivered))
		e.counters.Deliveries.Add(d.delivered)
		e.counters.DeliveredBytes.Add(uint64(d.bytes))
	}
	d.bytes, d.delivered = 0, 0
	for _, s := range d.kicked {
		s.cut() // aborted by enqueue
		s.wake()
	}
	clear(d.lists)
	clear(d.cands)
	clear(d.matched)
	clear(d.topics)
	clear(d.kicked)
	d.lists, d.cands, d.matched, d.topics, d.ends, d.kicked, d.event = d.lists[:0], d.cands[:0], d.matched[:0], d.topics[:0], d.ends[:0], d.kicked[:0], nil
	e.counters.DispatchDuration.Observe(time.Since(start))
}

// evaluate sets d.matched to the subscribers of the candidate groups
// whose pattern selects one of the topics. A group reached by several
// topics is evaluated until one matches, and kept once.
func (e *Engine) evaluate() {
	d := &e.dispatcher
	if len(d.topics) == 1 {
		for _, c := range d.cands {
			if c.Group.Pattern().TestURL(d.topics[0]) {
				d.matched = append(d.matched, c.Subs)
			}
		}
		return
	}
	if d.seen == nil {
		d.seen = make(map[*index.Group[*Stream]]bool)
	}
	start := 0
	for i, u := range d.topics {
		for _, c := range d.cands[start:d.ends[i]] {
			if !d.seen[c.Group] && c.Group.Pattern().TestURL(u) {
				d.seen[c.Group] = true
				d.matched = append(d.matched, c.Subs)
			}
		}
		start = d.ends[i]
	}
	clear(d.seen)
}

// deliver queues the event being dispatched for s, once however many of
// its matchers select it (SUB-13), and only when s may read it (AUTH-35).
// Only the dispatcher calls it. A stream that overflows is kept for
// dispatch to wake at its end.
func (e *Engine) deliver(s *Stream) {
	d := &e.dispatcher
	ev := d.event
	if ev.Seq <= s.lastSeq {
		// Offered already, through another matcher (SUB-13), or recorded
		// before s opened.
		return
	}
	s.lastSeq = ev.Seq
	if ev.Private && !s.owner.ReadsPrivate(ev) {
		return
	}
	n, ok, wake := s.enqueue(ev, d.now)
	if ok && n > 0 {
		d.bytes += int64(n)
		d.delivered++
	}
	switch {
	case !ok:
		d.kicked = append(d.kicked, s)
		if !s.started() {
			break // refused: its handler answers (see Serve)
		}
		e.counters.Overflows.Add(1)
		e.log.Debug("mercure: subscriber too slow, disconnected", "client", s.client)
	case wake && !s.wakePending:
		s.wakePending = true
		d.woken = append(d.woken, s)
	}
}
