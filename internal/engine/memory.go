package engine

import (
	"slices"
	"time"
)

// What the streams' queues hold counts against Limits.MaxQueuedBytes as
// the memory it takes: each event's bytes once, however many queues hold
// it (they share them), and a few words per queued entry. Every queue
// holding an event counts in the event's queues, and the last queue to
// let go of it releases its bytes.

// entryCost is what one queued event costs a queue beside the event's
// shared bytes: its pointer in the queue, its slice in a chunk being
// written, and some slack.
const entryCost = 40

// charge counts n new queue entries for ev, at the end of its dispatch.
func (e *Engine) charge(ev *Event, n int) {
	e.queued.Add(int64(len(ev.Bytes)) + int64(n)*entryCost)
	if ev.queues.Add(int32(n)) == 0 {
		// Every queue wrote it already (it went out while it was being
		// dispatched to the others).
		e.queued.Add(-int64(len(ev.Bytes)))
		e.freed()
	}
}

// unqueue counts out the queue entries of evs, which a stream wrote or
// dropped.
func (e *Engine) unqueue(evs []*Event) {
	if len(evs) == 0 {
		return
	}
	freed := int64(len(evs)) * entryCost
	for _, ev := range evs {
		if ev.queues.Add(-1) == 0 {
			freed += int64(len(ev.Bytes))
		}
	}
	e.queued.Add(-freed)
	e.freed()
}

// freed wakes the publishers and the dispatcher waiting for room, if
// memory went back under the budget.
func (e *Engine) freed() {
	if e.queued.Load() >= e.cfg.Limits.MaxQueuedBytes {
		return
	}
	if e.dispatchWaits.Load() {
		select {
		case e.budgetRoom <- struct{}{}:
		default:
		}
	}
	if e.waiting.Load() == 0 {
		return
	}
	f := &e.feed
	f.mu.Lock()
	e.roomLocked()
	f.mu.Unlock()
}

// overBudget reports whether the queues take more than MaxQueuedBytes.
func (e *Engine) overBudget() bool {
	return e.queued.Load() > e.cfg.Limits.MaxQueuedBytes
}

// stallGrace is how long a stream may make no progress writing before it
// counts as stalled, and goes when its queue is past its bound or the
// queues are over their budget: Config.StallGrace, by default a quarter
// of the write timeout, which ends it anyway.
func (e *Engine) stallGrace() time.Duration {
	if e.cfg.StallGrace > 0 {
		return e.cfg.StallGrace
	}
	return e.cfg.WriteTimeout / 4
}

// shedEvery spaces the sheddings: each scans the open streams.
const shedEvery = 100 * time.Millisecond

// shed ends the stalled streams when the queues are over their budget,
// anonymous ones first, those that hold the most first, until the queues
// are back under three quarters of the budget: a client that stopped
// reading (or, past its queue's bound, reads too slowly to take a
// queue's worth within the write timeout) pays for what it pins, not the
// streams that keep up (they are never ended for the budget; this hub's
// publishers and its dispatcher wait for them instead, see WaitRoom and
// waitBudget). The dispatcher calls it after its dispatches and while it
// waits, and the waiting publishers while they wait; it runs at most
// every shedEvery.
func (e *Engine) shed(now time.Time) {
	last := e.lastShed.Load()
	if !e.overBudget() || now.UnixNano()-last < int64(shedEvery) || !e.lastShed.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	type cand struct {
		s    *Stream
		size int
		anon bool
	}
	var stalled []cand
	for _, s := range e.snapshot() {
		if size, ok := s.stalled(now); ok {
			stalled = append(stalled, cand{s, size, s.anonymous})
		}
	}
	// Anonymous streams first: they draw on their own share.
	slices.SortFunc(stalled, func(a, b cand) int {
		if a.anon != b.anon {
			if a.anon {
				return -1
			}
			return 1
		}
		return b.size - a.size
	})
	target := e.cfg.Limits.MaxQueuedBytes / 4 * 3
	for _, c := range stalled {
		if e.queued.Load() <= target {
			break
		}
		if !c.s.abortOpen(EndQueueOverflow) {
			continue // ending already, for its own reason: not counted twice
		}
		e.counters.Shed.Add(1)
		e.counters.Overflows.Add(1)
		e.log.Debug("mercure: the queues are over their budget; ending a subscriber that stopped reading, or reads too slowly", "client", c.s.client, "unsent", c.size)
	}
}

// stalled reports whether s made no progress writing for the stall
// grace, with events unsent, or, past its queue's bound, is behind by its
// connection (see behindLocked), and how many bytes it holds then.
func (s *Stream) stalled(now time.Time) (size int, ok bool) {
	lim := &s.e.cfg.Limits
	s.mu.Lock()
	size = s.queueBytes + s.inflightBytes
	past := len(s.queue)+len(s.inflight) > lim.QueueEvents || size > lim.QueueBytes
	ok = size > 0 && (s.stuckLocked(now.UnixNano()) || past && s.behindLocked(now.UnixNano()))
	s.mu.Unlock()
	return size, ok
}

// stuckLocked reports whether the connection of s took nothing of what
// its writer handed it for the stall grace: a goroutine's write that has
// not returned, or a detached stream blocked on its connection with no
// progress. The caller holds s.mu.
func (s *Stream) stuckLocked(now int64) bool {
	grace := int64(s.e.stallGrace())
	if w := s.writing.Load(); w != 0 && now-w >= grace {
		return true // a goroutine's write, stuck
	}
	return s.blocked && now-s.lastWrite.Load() >= grace
}

// behindLocked reports whether s is behind by its own connection, when
// its queue is past its bound: the connection stopped taking bytes (see
// stuckLocked), or took so few that what the writer handed it, a queue's
// worth at most (see step), has not all gone out within the write
// timeout. A stream whose writer has not reached it yet, or whose
// connection takes what it is handed, is not. The caller holds s.mu.
func (s *Stream) behindLocked(now int64) bool {
	return s.stuckLocked(now) || s.sending != 0 && now-s.sending >= int64(s.e.cfg.WriteTimeout)
}
