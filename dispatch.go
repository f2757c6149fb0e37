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
	collectFn func(*stream) // h.collect, bound once
	streams   []*stream     // the streams selected for event
	// groups holds the candidate patterns of each topic in turn:
	// groups[ends[i-1]:ends[i]] are those of topics[i].
	groups  []*index.Group[*stream]
	topics  []topicurl.URL
	ends    []int
	matched []*index.Group[*stream]
	seen    map[*index.Group[*stream]]bool // verdicts, with several topics
	kicked  []*stream

	testHookEvaluate func() // tests: called before patterns are evaluated
}

// dispatch is the store's listener: it hands e to every matching stream.
// The store calls it for one event at a time, in sequence order.
//
// The hub's lock is held only to look subscriptions up: URL patterns are
// evaluated, private updates authorized and events queued without it, so
// that opening and closing streams never waits for them (MAT-9: patterns
// cost time), and the exact and "*" subscribers get e before any pattern
// is evaluated.
func (h *Hub) dispatch(e *Event) {
	d := &h.dispatcher
	e.encoded() // before taking the lock, for events from other instances
	d.event = e
	h.mu.Lock()
	h.index.MatchExact(e.Topics, d.collectFn)
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
	h.deliver()

	if len(d.groups) > 0 {
		if d.testHookEvaluate != nil {
			d.testHookEvaluate()
		}
		h.evaluate()
		if len(d.matched) > 0 {
			h.mu.Lock()
			for _, g := range d.matched {
				g.Each(d.collectFn)
			}
			h.mu.Unlock()
			h.deliver()
		}
	}
	clear(d.groups)
	clear(d.matched)
	clear(d.topics)
	d.groups, d.matched, d.topics, d.ends, d.event = d.groups[:0], d.matched[:0], d.topics[:0], d.ends[:0], nil
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

// collect selects s for the event being dispatched, once however many of
// its matchers select the event (SUB-13). The caller holds h.mu.
func (h *Hub) collect(s *stream) {
	if e := h.dispatcher.event; s.lastSeq != e.Seq {
		s.lastSeq = e.Seq
		h.dispatcher.streams = append(h.dispatcher.streams, s)
	}
}

// deliver queues the event for the streams collected, those that may read
// it (AUTH-35), then cuts the writes of those that overflowed: after the
// queues' locks are released, since on HTTP/2 that is a message to the
// connection's goroutine.
func (h *Hub) deliver() {
	d := &h.dispatcher
	e := d.event
	for _, s := range d.streams {
		if e.Private && !s.principal.mayReadDispatched(e, h.resolver) {
			continue
		}
		if !s.enqueue(e) {
			h.overflows.Add(1)
			d.kicked = append(d.kicked, s)
		}
	}
	for _, s := range d.kicked {
		s.abort()
	}
	clear(d.streams)
	clear(d.kicked)
	d.streams, d.kicked = d.streams[:0], d.kicked[:0]
}
