package engine

import (
	"context"
	"sync"
	"time"
)

// The store's feed reaches the streams in two steps. The store's
// listener only appends what it is given to the feed's queue
// ([Engine.Push]): the store calls it under its own lock, so Append
// returns, and the publisher gets its answer, without waiting for the
// fan-out. A goroutine started when the queue fills and ending when it is
// empty dispatches the queued items one at a time, in the store's order:
// per-stream order is store order.
//
// The feed is bounded. This hub's publishers wait for room (see WaitRoom)
// while its own updates not yet dispatched reach Limits.MaxPendingUpdates
// (or half of Limits.MaxQueuedBytes), or while the streams' queues are
// over their budget; the feed takes as many again from other hubs
// sharing the store, which never wait: past that, the hub drops what is
// pending and reports a gap (every open stream ends, and resumes from
// history), counted in Counters.FeedGaps. So another hub's traffic never
// holds this hub's publishers back, and never grows its memory without
// bound.

// feed is the queue between the store's listener and the dispatcher.
type feed struct {
	mu      sync.Mutex
	items   []*Event // in the store's order; nil marks a gap
	spare   []*Event
	running bool // a dispatcher goroutine is draining items
	done    chan struct{}
	// pending counts the events queued or being dispatched, and
	// pendingBytes their encoded size.
	pending, pendingBytes int64
	// own holds the size of this hub's own updates recorded and not yet
	// dispatched, by Seq (see Published); ownBytes is their total.
	own      map[uint64]int64
	ownBytes int64
	// dispatched is the Seq of the last event dispatched or dropped.
	dispatched uint64
	room       chan struct{} // closed when room is made, if waited for
}

// Position is a place in the store's order: the event with Seq and ID.
type Position struct {
	Seq uint64
	ID  string
}

// Begin sets the position the engine starts from, before any event: the
// latest event the store holds, or "earliest".
func (e *Engine) Begin(id string) {
	e.last.CompareAndSwap(nil, &Position{ID: id})
}

// Last returns the position of the latest event recorded, as far as the
// engine knows: pushed by the store's feed, or published by this hub.
func (e *Engine) Last() Position {
	if p := e.last.Load(); p != nil {
		return *p
	}
	return Position{}
}

// advance moves the last position to p when p is later.
func (e *Engine) advance(p *Position) {
	for {
		cur := e.last.Load()
		if cur != nil && cur.Seq >= p.Seq {
			return
		}
		if e.last.CompareAndSwap(cur, p) {
			return
		}
	}
}

// Published records that this hub's publisher got the event seq, of
// topics, recorded (Append returned): a stream that opens from now on
// does not get it live, even on a store whose feed delivers it later. It
// also counts it as one of this hub's own updates until it is
// dispatched, for WaitRoom, unless the store's feed was told not to read
// its topics (see FollowInterest): then no stream here needs it, and it
// may never come back.
func (e *Engine) Published(seq uint64, id string, topics []string, size int) {
	e.advance(&Position{Seq: seq, ID: id})
	if !e.Reads(topics) {
		return
	}
	f := &e.feed
	f.mu.Lock()
	if seq > f.dispatched {
		if f.own == nil {
			f.own = make(map[uint64]int64)
		}
		f.own[seq] = int64(size)
		f.ownBytes += int64(size)
	}
	f.mu.Unlock()
}

// Push queues ev for dispatch, starting the dispatcher if it is not
// running. It never blocks on the dispatcher. A stream registered from
// now on does not get ev live (see register): ev is recorded, so a replay
// from it misses nothing.
func (e *Engine) Push(ev *Event) {
	e.advance(&Position{Seq: ev.Seq, ID: ev.ID})
	e.push(ev)
}

// Gap reports that the store's feed skipped events: every stream open
// when the dispatcher reaches the gap writes what it has queued and ends,
// so that its client resumes from history; none gets an event from after
// the gap before it ends.
func (e *Engine) Gap() { e.push(nil) }

// Rewind reports that the store's history no longer holds events its
// feed passed on (a failover to a replica that lacked them) and ends at
// p: every stream open when the dispatcher reaches the rewind ends as at
// a gap, and the engine's positions go back to p, since the events that
// follow may have Seqs at or below those it has seen. A stream that
// opens from now on starts at p.
func (e *Engine) Rewind(p Position) {
	e.last.Store(&p)
	e.push(&Event{Seq: p.Seq, ID: p.ID, rewind: true})
}

func (e *Engine) push(ev *Event) {
	f := &e.feed
	lim := &e.cfg.Limits
	f.mu.Lock()
	f.items = append(f.items, ev)
	if ev != nil && !ev.rewind {
		f.pending++
		f.pendingBytes += int64(len(ev.Bytes))
		if f.pending > 2*int64(lim.MaxPendingUpdates) || f.pendingBytes > lim.MaxQueuedBytes {
			e.dropLocked()
		}
	}
	start := !f.running
	if start {
		f.running = true
		f.done = make(chan struct{})
	}
	f.mu.Unlock()
	if start {
		go e.drainFeed()
	}
}

// dropLocked drops the events that wait for the dispatcher, which is
// too far behind, and queues a gap in their place: the streams resume
// from history, where the events are. The caller holds e.feed.mu.
func (e *Engine) dropLocked() {
	f := &e.feed
	var last uint64
	var rewind *Event // the last rewind among the items, which stays queued
	for _, ev := range f.items {
		switch {
		case ev == nil:
		case ev.rewind:
			rewind = ev
		default:
			f.pending--
			f.pendingBytes -= int64(len(ev.Bytes))
			last = max(last, ev.Seq)
		}
	}
	clear(f.items)
	f.items = append(f.items[:0], rewind) // a rewind ends the streams as a gap does
	if rewind == nil {
		// With a rewind queued, the dispatcher forgets this hub's own
		// updates when it reaches it.
		e.forgetOwnLocked(last)
	}
	e.counters.FeedGaps.Add(1)
	e.roomLocked()
}

// forgetOwnLocked records that the events up to seq are dispatched (or
// dropped): this hub's own among them no longer count. The caller holds
// e.feed.mu.
func (e *Engine) forgetOwnLocked(seq uint64) {
	f := &e.feed
	if seq <= f.dispatched {
		return
	}
	f.dispatched = seq
	for s, size := range f.own {
		if s <= seq {
			delete(f.own, s)
			f.ownBytes -= size
		}
	}
}

// rewound forgets the positions after seq, where the dispatcher reached
// a rewind of the store's history: the updates of this hub's not yet
// dispatched were recorded in the history that is gone, or will be
// dispatched at Seqs after seq.
func (e *Engine) rewound(seq uint64) {
	f := &e.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dispatched = seq
	clear(f.own)
	f.ownBytes = 0
	e.roomLocked()
}

// drainFeed dispatches the feed's items until none is left. After Stop,
// it drops them: the streams are ending, and their clients will resume
// from history.
func (e *Engine) drainFeed() {
	f := &e.feed
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
		var last uint64
		for i := range batch {
			ev := batch[i]
			if ev == nil || ev.rewind {
				e.wake()
				if ev != nil {
					e.rewound(ev.Seq)
					last = 0 // the Seqs before the rewind are forgotten
					batch[i] = nil
				}
				e.feedGap()
				continue
			}
			if e.waitBudget(); !e.stopped() {
				e.dispatch(ev)
			}
			n++
			size += int64(len(ev.Bytes))
			last = ev.Seq
			batch[i] = nil
			if n%wakeEvery == 0 {
				e.wake()
			}
		}
		e.wake()
		e.shed(time.Now())
		f.mu.Lock()
		f.pending -= n
		f.pendingBytes -= size
		e.forgetOwnLocked(last)
		e.roomLocked()
		f.spare = batch[:0]
		f.mu.Unlock()
	}
}

// waitBudget holds the dispatcher while the queues are over their budget
// (Limits.MaxQueuedBytes), as this hub's publishers are held (see
// WaitRoom): the writers of what is queued make room, and the stalled
// streams are shed. A queue takes events past its own bound while its
// stream is not behind by its own connection (see enqueue): the budget
// bounds them all, the updates of other hubs sharing the store included,
// which no publisher of this hub holds back (past the feed's own bound,
// they are dropped and the streams resume from history: see push). It
// returns at once after Stop.
func (e *Engine) waitBudget() {
	if !e.overBudget() {
		return
	}
	e.wake() // the writers of what was queued since the last wake
	t := time.NewTimer(shedEvery)
	defer t.Stop()
	for !e.stopped() {
		e.dispatchWaits.Store(true)
		if !e.overBudget() { // after the flag: freed signals from now on
			break
		}
		e.shed(time.Now())
		select {
		case <-e.budgetRoom:
		case <-t.C: // look again, and shed again if need be
			t.Reset(shedEvery)
		case <-e.ctx.Done():
		}
	}
	e.dispatchWaits.Store(false)
}

// feedGap ends every open stream when the store's feed skipped events: no
// stream may go on as if it had them. Each client resumes from history.
// The dispatcher runs it before the next event, so that no queue gets an
// event from after the gap before its stream is ended.
func (e *Engine) feedGap() {
	// Under e.life, no stream registers meanwhile: every stream open
	// before the gap is ended.
	e.life.Lock()
	defer e.life.Unlock()
	e.log.Warn("mercure: the hub missed events of the store's feed (dropped from history, or too far behind); ending the open streams so that their clients resume from history", "streams", e.counts.total)
	e.streams.each(func(ss []*Stream) {
		for _, s := range ss {
			s.End(EndHistoryGap, nil)
		}
	})
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
func (e *Engine) wake() {
	d := &e.dispatcher
	for _, s := range d.woken {
		s.wakePending = false
		s.wake()
	}
	clear(d.woken)
	d.woken = d.woken[:0]
}

// full reports whether this hub's publishers must wait. The caller holds
// e.feed.mu. With none of its own updates pending, a publisher waits only
// for the queues.
func (e *Engine) full() bool {
	f := &e.feed
	lim := &e.cfg.Limits
	if len(f.own) > 0 && (len(f.own) >= lim.MaxPendingUpdates || f.ownBytes >= lim.MaxQueuedBytes/2) {
		return true
	}
	return e.overBudget()
}

// roomLocked wakes the publishers waiting for room, if there is room.
// The caller holds e.feed.mu.
func (e *Engine) roomLocked() {
	f := &e.feed
	if f.room != nil && !e.full() {
		close(f.room)
		f.room = nil
	}
}

// WaitRoom waits until this hub may record one more update, or ctx ends
// (its error), or Stop is called (ErrClosed): while its own updates not
// yet dispatched reach Limits.MaxPendingUpdates (or half of
// Limits.MaxQueuedBytes), or while the streams' queues are over
// Limits.MaxQueuedBytes. Only a hub that receives updates faster than it
// can hand them to its streams waits here: flow control, not fan-out.
func (e *Engine) WaitRoom(ctx context.Context) error {
	f := &e.feed
	for {
		f.mu.Lock()
		if !e.full() {
			f.mu.Unlock()
			return nil
		}
		if f.room == nil {
			f.room = make(chan struct{})
		}
		room := f.room
		f.mu.Unlock()
		if e.overBudget() {
			// Stalled streams may be what holds the queues: they go.
			e.shed(time.Now())
		}
		e.waiting.Add(1)
		t := time.NewTimer(shedEvery)
		select {
		case <-room:
		case <-t.C: // look again, and shed again if need be
		case <-ctx.Done():
		case <-e.ctx.Done():
		}
		t.Stop()
		e.waiting.Add(-1)
		switch {
		case e.stopped():
			return ErrClosed
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
}

// WaitDispatched waits until the dispatcher has handled what the feed
// holds now, or ctx ends. After Stop, the dispatcher drops what is left
// and ends within one dispatch.
func (e *Engine) WaitDispatched(ctx context.Context) error {
	f := &e.feed
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
