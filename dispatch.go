package mercure

import (
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// dispatcher is the scratch state of dispatch, reused from one event to
// the next. The store calls dispatch for one event at a time, so only one
// dispatch touches it at once.
type dispatcher struct {
	event     *Event
	deliverFn func(*stream) // h.deliver, bound once
	// groups holds the candidate patterns of each topic in turn:
	// groups[ends[i-1]:ends[i]] are those of topics[i].
	groups  []*index.Group[*stream]
	topics  []topicurl.URL
	ends    []int
	matched []*index.Group[*stream]
	seen    map[*index.Group[*stream]]bool // verdicts, with several topics
	kicked  []*stream
	// queued is the bytes this dispatch queued, added to the hub's count
	// once at its end: one atomic add per dispatch, not per delivery;
	// room is what Limits.MaxQueuedBytes left when it began.
	queued, room int64

	testHookEvaluate func() // tests: called before patterns are evaluated
}

// dispatch is the store's listener: it hands e to every matching stream.
// The store calls it for one event at a time, in sequence order.
//
// URL patterns are evaluated without the hub's lock (MAT-9: a pattern
// costs time), so that opening and closing streams never waits for them,
// and after the exact and "*" subscribers have e. Queuing e for a stream
// takes the lock: it costs nanoseconds, and the index's lists cannot
// change under it. Streams that overflow are cut after the lock is
// released.
func (h *Hub) dispatch(e *Event) {
	d := &h.dispatcher
	e.encoded() // before taking the lock, for events from other instances
	d.event = e
	// Writers may free some meanwhile: room errs on the safe side.
	d.room = h.cfg.limits.MaxQueuedBytes - h.queued.Load()
	h.mu.Lock()
	h.index.MatchExact(e.Topics, d.deliverFn)
	if h.index.HasPatterns() {
		// Resolved once per event, not once per pattern.
		for _, u := range e.urls(h.resolver) {
			if u.Href == "" {
				continue // MAT-8: an unparsable topic never matches a pattern
			}
			d.groups = h.index.Candidates(u, d.groups)
			d.topics = append(d.topics, u)
			d.ends = append(d.ends, len(d.groups))
		}
	}
	h.mu.Unlock()

	if len(d.groups) > 0 {
		if d.testHookEvaluate != nil {
			d.testHookEvaluate()
		}
		h.evaluate()
		if len(d.matched) > 0 {
			h.mu.Lock()
			for _, g := range d.matched {
				g.Each(d.deliverFn)
			}
			h.mu.Unlock()
		}
	}
	// Writers subtract what they take: until this add, the count may dip
	// below what is queued, by this one dispatch at most.
	h.queued.Add(d.queued)
	d.queued = 0
	for _, s := range d.kicked {
		s.abort()
	}
	clear(d.groups)
	clear(d.matched)
	clear(d.topics)
	clear(d.kicked)
	d.groups, d.matched, d.topics, d.ends, d.kicked, d.event = d.groups[:0], d.matched[:0], d.topics[:0], d.ends[:0], d.kicked[:0], nil
	h.lastEventID.Store(&e.ID)
	h.dispatched.Add(1)
}

// evaluate sets d.matched to the candidate groups whose pattern selects
// one of the topics. A group reached by several topics is evaluated until
// one matches, and kept once.
func (h *Hub) evaluate() {
	d := &h.dispatcher
	if len(d.topics) == 1 {
		for _, g := range d.groups {
			if g.Pattern().Test(d.topics[0].Href) {
				d.matched = append(d.matched, g)
			}
		}
		return
	}
	if d.seen == nil {
		d.seen = make(map[*index.Group[*stream]]bool)
	}
	start := 0
	for i, u := range d.topics {
		for _, g := range d.groups[start:d.ends[i]] {
			if !d.seen[g] && g.Pattern().Test(u.Href) {
				d.seen[g] = true
				d.matched = append(d.matched, g)
			}
		}
		start = d.ends[i]
	}
	clear(d.seen)
}

// deliver queues the event being dispatched for s, once however many of
// its matchers select it (SUB-13), and only when s may read it (AUTH-35).
// The caller holds h.mu. A stream that overflows is kept for dispatch to
// cut once the lock is released: on HTTP/2 that is a message to the
// connection's goroutine.
func (h *Hub) deliver(s *stream) {
	d := &h.dispatcher
	e := d.event
	if s.lastSeq == e.Seq {
		return
	}
	s.lastSeq = e.Seq
	if e.Private && !s.principal.mayReadDispatched(e, h.resolver) {
		return
	}
	n, ok := s.enqueue(e, d.room-d.queued)
	d.queued += int64(n)
	if !ok {
		h.overflows.Add(1)
		d.kicked = append(d.kicked, s)
	}
}
