package mercure

import (
	"context"
	"sync"
	"time"

	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// The store's feed reaches the hub's streams in two steps. The store's
// listener only appends what it is given to the feed's queue: the store
// calls it under its own lock, so Append returns, and the publisher gets
// its answer, without waiting for the fan-out (Hub.Publish records; it
// does not deliver). A goroutine started when the queue fills and ending
// when it is empty dispatches the queued items one at a time, in the
// store's order: per-stream order is store order.

// feed is the queue between the store's listener and the dispatcher.
type feed struct {
	mu      sync.Mutex
	items   []*Event // in the store's order; nil marks a gap
	spare   []*Event
	running bool // a dispatcher goroutine is draining items
	done    chan struct{}
	// pending counts the events queued or being dispatched, and
	// pendingBytes their encoded size: Publish waits for room beyond
	// Limits.MaxPendingUpdates or Limits.MaxQueuedBytes of them.
	pending, pendingBytes int64
	room                  chan struct{} // closed when room is made, if waited for
}

// listener is what the hub gives the store to Listen with.
func (h *Hub) listener() Listener {
	return Listener{
		Event: func(e *Event) {
			// The hub advertises it at once (REC-13): it is recorded, so a
			// replay from it misses nothing. A stream that opens from now
			// on does not get it live (see register).
			h.lastEventID.Store(&e.ID)
			h.lastSeq.Store(e.Seq)
			h.push(e)
		},
		// Only reported: it needs no order with the events.
		Status: h.feedStatus,
		// Ordered with the events: the streams must get those before it.
		Gap: func() { h.push(nil) },
	}
}

// push queues e for dispatch (nil: a gap), starting the dispatcher if it is not
// running. It never blocks on the dispatcher.
func (h *Hub) push(e *Event) {
	f := &h.feed
	f.mu.Lock()
	f.items = append(f.items, e)
	if e != nil {
		f.pending++
		f.pendingBytes += int64(len(e.encoded()))
	}
	start := !f.running
	if start {
		f.running = true
		f.done = make(chan struct{})
	}
	f.mu.Unlock()
	if start {
		go h.drain()
	}
}

// drain dispatches the feed's items until none is left. After Shutdown
// began, it drops them: the streams are ending, and their clients will
// resume from history.
func (h *Hub) drain() {
	f := &h.feed
	for {
		f.mu.Lock()
		batch := f.items
		if len(batch) == 0 {
			f.running = false
			close(f.done)
			f.mu.Unlock()
			return
		}
		f.items, f.spare = f.spare[:0], nil
		f.mu.Unlock()
		var n, size int64
		for i := range batch {
			e := batch[i]
			if e == nil {
				h.wake()
				h.feedGap()
				continue
			}
			if h.ctx.Err() == nil {
				h.dispatch(e)
			}
			n++
			size += int64(len(e.encoded()))
			batch[i] = nil
			if n%wakeEvery == 0 {
				h.wake()
			}
		}
		h.wake()
		f.mu.Lock()
		f.pending -= n
		f.pendingBytes -= size
		if f.room != nil && !f.full(&h.cfg.limits) {
			close(f.room)
			f.room = nil
		}
		f.spare = batch[:0]
		f.mu.Unlock()
	}
}

// wakeEvery is how many events of one batch the dispatcher queues at
// most before it wakes their streams' writers.
const wakeEvery = 16

// wake signals the writers of the streams that events were queued for
// since the last wake. Writers are woken once per batch of events rather
// than once per event: a hub that keeps up wakes each writer as soon as
// the fan-out of an update is done, and one that is behind hands each
// writer all it queued meanwhile (up to wakeEvery events) for one write
// and one flush, and keeps the dispatcher from competing with the
// writers for the processor in the middle of a fan-out.
func (h *Hub) wake() {
	d := &h.dispatcher
	for _, s := range d.woken {
		s.wakePending = false
		s.wake()
	}
	clear(d.woken)
	d.woken = d.woken[:0]
}

// full reports whether publishers must wait for the dispatcher. The
// caller holds f.mu. An empty feed always takes an update.
func (f *feed) full(lim *Limits) bool {
	return f.pending > 0 && (f.pending >= int64(lim.MaxPendingUpdates) || f.pendingBytes >= lim.MaxQueuedBytes)
}

// waitRoom waits until the dispatcher has room for one more update, or
// ctx ends. Only a hub that receives updates faster than it can hand
// them to its streams waits here: flow control, not fan-out.
func (h *Hub) waitRoom(ctx context.Context) error {
	f := &h.feed
	for {
		f.mu.Lock()
		if !f.full(&h.cfg.limits) {
			f.mu.Unlock()
			return nil
		}
		if f.room == nil {
			f.room = make(chan struct{})
		}
		room := f.room
		f.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-h.ctx.Done():
			return ErrHubClosed
		}
	}
}

// waitDispatched waits until the dispatcher has handled what the feed
// holds now: Shutdown calls it once the store no longer feeds the hub.
func (h *Hub) waitDispatched(ctx context.Context) error {
	f := &h.feed
	f.mu.Lock()
	done, running := f.done, f.running
	f.mu.Unlock()
	if !running {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dispatcher is the scratch state of dispatch, reused from one event to
// the next. Only the dispatcher goroutine touches it, one event at a time.
type dispatcher struct {
	event *Event
	lists [][]*stream // exact and "*" subscribers
	// cands holds the candidate patterns of each topic in turn:
	// cands[ends[i-1]:ends[i]] are those of topics[i].
	cands   []index.Candidate[*stream]
	topics  []topicurl.URL
	ends    []int
	matched [][]*stream
	seen    map[*index.Group[*stream]]bool // verdicts, with several topics
	kicked  []*stream
	woken   []*stream // streams with events queued since the last wake
	// queued is the bytes this dispatch queued, added to the hub's count
	// once at its end: one atomic add per dispatch, not per delivery;
	// room is what Limits.MaxQueuedBytes left when it began.
	queued, room int64
	// delivered counts this dispatch's deliveries, added to the hub's
	// metrics once at its end, with queued.
	delivered uint64

	testHookDispatch func() // tests: called once the index is looked up
	testHookEvaluate func() // tests: called before patterns are evaluated
}

// dispatch hands e to every matching stream.
//
// The hub's lock is held only to look the index up: the lists it returns
// stay as they were until the dispatch ends (see [index.Index.BeginRead]),
// so that opening and closing streams never waits for a fan-out, nor for
// URL patterns to be evaluated (MAT-9: a pattern costs time). A stream
// registered after the look-up misses e, which its replay covers: e was
// recorded before the look-up, so before the replay began. A stream that
// closed since gets e in a queue it no longer reads.
//
// Topics are resolved as URLs only once a pattern has been registered
// (h.patternsUsed). One registered between that check and the look-up
// misses e without harm, for the same reason: e was recorded before.
func (h *Hub) dispatch(e *Event) {
	h.dispatched.Add(1) // before any stream has it: Stats never lags a client
	start := time.Now()
	d := &h.dispatcher
	e.encoded() // outside the lock, for events from other instances
	d.event = e
	// Writers may free some meanwhile: room errs on the safe side.
	d.room = h.cfg.limits.MaxQueuedBytes - h.queued.Load()
	var urls []topicurl.URL
	if h.patternsUsed.Load() {
		urls = e.urls(h.resolver) // resolved once per event, not per pattern
	}
	h.mu.Lock()
	read := h.index.BeginRead()
	d.lists = h.index.Exact(read, e.Topics, d.lists)
	if h.index.HasPatterns() {
		for _, u := range urls {
			if u.Href == "" {
				continue // MAT-8: an unparsable topic never matches a pattern
			}
			d.cands = h.index.Candidates(read, u, d.cands)
			d.topics = append(d.topics, u)
			d.ends = append(d.ends, len(d.cands))
		}
	}
	h.mu.Unlock()
	if d.testHookDispatch != nil {
		d.testHookDispatch()
	}

	// Exact and "*" subscribers first: they need no evaluation.
	for _, l := range d.lists {
		for _, s := range l {
			h.deliver(s)
		}
	}
	if len(d.cands) > 0 {
		// Patterns cost time (MAT-9): the subscribers that need no
		// evaluation do not wait for it.
		h.wake()
		if d.testHookEvaluate != nil {
			d.testHookEvaluate()
		}
		h.evaluate()
		for _, l := range d.matched {
			for _, s := range l {
				h.deliver(s)
			}
		}
	}
	h.index.EndRead(read)
	// Writers subtract what they take: until this add, the count may dip
	// below what is queued, by this one dispatch at most.
	h.queued.Add(d.queued)
	if d.delivered > 0 {
		h.metrics.deliveries.Add(d.delivered)
		h.metrics.deliveredBytes.Add(uint64(d.queued))
	}
	d.queued, d.delivered = 0, 0
	for _, s := range d.kicked {
		s.abort()
	}
	clear(d.lists)
	clear(d.cands)
	clear(d.matched)
	clear(d.topics)
	clear(d.kicked)
	d.lists, d.cands, d.matched, d.topics, d.ends, d.kicked, d.event = d.lists[:0], d.cands[:0], d.matched[:0], d.topics[:0], d.ends[:0], d.kicked[:0], nil
	h.metrics.dispatchDuration.observe(time.Since(start))
}

// evaluate sets d.matched to the subscribers of the candidate groups
// whose pattern selects one of the topics. A group reached by several
// topics is evaluated until one matches, and kept once.
func (h *Hub) evaluate() {
	d := &h.dispatcher
	if len(d.topics) == 1 {
		for _, c := range d.cands {
			if c.Group.Pattern().Test(d.topics[0].Href) {
				d.matched = append(d.matched, c.Subs)
			}
		}
		return
	}
	if d.seen == nil {
		d.seen = make(map[*index.Group[*stream]]bool)
	}
	start := 0
	for i, u := range d.topics {
		for _, c := range d.cands[start:d.ends[i]] {
			if !d.seen[c.Group] && c.Group.Pattern().Test(u.Href) {
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
// dispatch to cut at its end: on HTTP/2 that is a message to the
// connection's goroutine.
func (h *Hub) deliver(s *stream) {
	d := &h.dispatcher
	e := d.event
	if e.Seq <= s.lastSeq {
		// Offered already, through another matcher (SUB-13), or recorded
		// before s opened.
		return
	}
	s.lastSeq = e.Seq
	if e.Private && !s.principal.mayReadDispatched(e, h.resolver) {
		return
	}
	n, ok := s.enqueue(e, d.room-d.queued)
	d.queued += int64(n)
	if n > 0 {
		d.delivered++
	}
	switch {
	case !ok:
		h.overflows.Add(1)
		d.kicked = append(d.kicked, s)
	case n > 0 && !s.wakePending:
		s.wakePending = true
		d.woken = append(d.woken, s)
	}
}
