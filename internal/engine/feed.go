package engine

import (
	"context"
	"sync"
)

// The store's feed reaches the streams in two steps. The store's
// listener only appends what it is given to the feed's queue ([Engine.Push]):
// the store calls it under its own lock, so Append returns, and the
// publisher gets its answer, without waiting for the fan-out. A goroutine
// started when the queue fills and ending when it is empty dispatches the
// queued items one at a time, in the store's order: per-stream order is
// store order.

// feed is the queue between the store's listener and the dispatcher.
type feed struct {
	mu      sync.Mutex
	items   []*Event // in the store's order; nil marks a gap
	spare   []*Event
	running bool // a dispatcher goroutine is draining items
	done    chan struct{}
	// pending counts the events queued or being dispatched, and
	// pendingBytes their encoded size: WaitRoom waits beyond
	// Limits.MaxPendingUpdates or Limits.MaxQueuedBytes of them.
	pending, pendingBytes int64
	room                  chan struct{} // closed when room is made, if waited for
}

// Push queues ev for dispatch, starting the dispatcher if it is not
// running. It never blocks on the dispatcher. A stream registered from
// now on does not get ev live (see register): ev is recorded, so a replay
// from it misses nothing.
func (e *Engine) Push(ev *Event) {
	e.lastSeq.Store(ev.Seq)
	e.push(ev)
}

// Gap reports that the store's feed skipped events: every stream open
// when the dispatcher reaches the gap writes what it has queued and ends,
// so that its client resumes from history; none gets an event from after
// the gap before it ends.
func (e *Engine) Gap() { e.push(nil) }

func (e *Engine) push(ev *Event) {
	f := &e.feed
	f.mu.Lock()
	f.items = append(f.items, ev)
	if ev != nil {
		f.pending++
		f.pendingBytes += int64(len(ev.Bytes))
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
		for i := range batch {
			ev := batch[i]
			if ev == nil {
				e.wake()
				e.feedGap()
				continue
			}
			if !e.stopped() {
				e.dispatch(ev)
			}
			n++
			size += int64(len(ev.Bytes))
			batch[i] = nil
			if n%wakeEvery == 0 {
				e.wake()
			}
		}
		e.wake()
		f.mu.Lock()
		f.pending -= n
		f.pendingBytes -= size
		if f.room != nil && !f.full(&e.cfg.Limits) {
			close(f.room)
			f.room = nil
		}
		f.spare = batch[:0]
		f.mu.Unlock()
	}
}

// feedGap ends every open stream when the store's feed skipped events: no
// stream may go on as if it had them. Each client resumes from history.
// The dispatcher runs it before the next event, so that no queue gets an
// event from after the gap before its stream is ended.
func (e *Engine) feedGap() {
	e.life.Lock()
	defer e.life.Unlock()
	e.log.Warn("mercure: the store's feed skipped events dropped from history; ending the open streams so that their clients resume from history", "streams", len(e.streams))
	for s := range e.streams {
		s.End(EndHistoryGap, nil)
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
func (e *Engine) wake() {
	d := &e.dispatcher
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

// WaitRoom waits until the dispatcher has room for one more update, or
// ctx ends (its error), or Stop is called (ErrClosed). Only a hub that
// receives updates faster than it can hand them to its streams waits
// here: flow control, not fan-out.
func (e *Engine) WaitRoom(ctx context.Context) error {
	f := &e.feed
	for {
		f.mu.Lock()
		if !f.full(&e.cfg.Limits) {
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
		case <-e.ctx.Done():
			return ErrClosed
		}
	}
}

// WaitDispatched waits until the dispatcher has handled what the feed
// holds now: the hub calls it once the store no longer feeds it.
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
