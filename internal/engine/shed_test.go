package engine

import (
	"testing"
	"time"
)

// Past the queues' budget, shed ends the stalled streams and counts each
// one it ends as an overflow, once: a stalled stream that is ending
// already (its write timed out) keeps its reason and is not counted
// (mercure_queue_overflows_total said more than the streams it closed).
func TestShedCountsOnlyTheStreamsItEnds(t *testing.T) {
	e := newEngine(t, func(c *Config) {
		c.Limits.QueueBytes, c.Limits.MaxQueuedBytes = 1000, 1000
		c.WriteTimeout = 4 * time.Millisecond // a stall grace of 1 ms
	})
	stalled := func(st state, why EndReason) *Stream {
		s := &Stream{e: e, state: st, why: why, blocked: true, inflightBytes: 500}
		s.lastWrite.Store(time.Now().Add(-time.Second).UnixNano())
		return s
	}
	open := stalled(stateOpen, EndUnset)
	timedOut := stalled(stateAborted, EndWriteError)
	ending := stalled(stateEnding, EndTokenExpired)
	e.life.Lock()
	for _, s := range []*Stream{open, timedOut, ending} {
		e.streams.add(s)
	}
	e.life.Unlock()
	defer func() {
		for _, s := range []*Stream{open, timedOut, ending} {
			e.streams.remove(s)
		}
	}()
	e.queued.Store(1 << 20) // over the budget, whatever shed frees

	e.shed(time.Now())
	if o, s := e.counters.Overflows.Load(), e.counters.Shed.Load(); o != 1 || s != 1 {
		t.Fatalf("%d overflows, %d shed: want the one open stream counted", o, s)
	}
	for s, want := range map[*Stream]EndReason{open: EndQueueOverflow, timedOut: EndWriteError, ending: EndTokenExpired} {
		if s.why != want || s.state != stateAborted {
			t.Errorf("a stream ended for %v (state %v), want %v, aborted", s.why, s.state, want)
		}
	}
}

// Anonymous streams draw on their own share of the queues' budget: past
// it, a stalled anonymous stream is ended before a stalled token
// holder's, even a smaller one (issue 24 item 1). By size alone, the
// token holder's would go, and that would be enough.
func TestShedEndsAnonymousStreamsFirst(t *testing.T) {
	e := newEngine(t, func(c *Config) {
		c.Limits.QueueBytes, c.Limits.MaxQueuedBytes = 5000, 5000 // shed down to 3 750
		c.WriteTimeout = 4 * time.Millisecond
	})
	stalled := func(anonymous bool, size int) *Stream {
		ev := &Event{Seq: 1, Bytes: make([]byte, size)}
		ev.queues.Add(1)
		s := &Stream{e: e, state: stateOpen, anonymous: anonymous, blocked: true, queue: []*Event{ev}, queueBytes: size}
		s.lastWrite.Store(time.Now().Add(-time.Second).UnixNano())
		e.queued.Add(int64(size) + entryCost)
		return s
	}
	token, anon := stalled(false, 3000), stalled(true, 2500)
	e.life.Lock()
	e.streams.add(token)
	e.streams.add(anon)
	e.life.Unlock()
	defer func() {
		e.streams.remove(token)
		e.streams.remove(anon)
	}()

	e.shed(time.Now())
	if anon.why != EndQueueOverflow || token.state != stateOpen {
		t.Fatalf("anonymous stream ended for %v, token holder's state %v: want the anonymous one shed, the other open", anon.why, token.state)
	}
	if q := e.queued.Load(); q != 3000+entryCost {
		t.Fatalf("%d bytes queued after shedding, want the token holder's %d", q, 3000+entryCost)
	}
}

// Past the queues' budget, a stream past its own queue's bound that takes
// bytes, but has not taken what its writer handed it within the write
// timeout, is shed as a stalled one is: it reads too slowly for the
// hub's traffic, and the dispatcher, waiting for the budget, queues
// nothing that would end it for overflow. Within its bound, or handed
// its events more recently, a stream that takes bytes is kept.
func TestShedEndsStreamsTooSlowPastTheirBound(t *testing.T) {
	const timeout = time.Second
	e := newEngine(t, func(c *Config) {
		c.Limits.QueueEvents, c.Limits.QueueBytes, c.Limits.MaxQueuedBytes = 2, 1000, 1000
		c.WriteTimeout, c.StallGrace = timeout, time.Hour // none is stuck
	})
	now := time.Now()
	slow := func(events int, sending time.Duration) *Stream {
		s := &Stream{e: e, state: stateOpen, live: true, blocked: true, inflightBytes: 100, sending: now.Add(-sending).UnixNano()}
		for i := range events {
			s.queue = append(s.queue, testEvent(uint64(i+1)))
		}
		s.lastWrite.Store(now.UnixNano()) // it takes bytes
		return s
	}
	pastTooSlow, pastRecent, withinTooSlow := slow(3, timeout), slow(3, timeout/2), slow(1, timeout)
	streams := []*Stream{pastTooSlow, pastRecent, withinTooSlow}
	e.life.Lock()
	for _, s := range streams {
		e.streams.add(s)
	}
	e.life.Unlock()
	defer func() {
		for _, s := range streams {
			e.streams.remove(s)
		}
	}()
	e.queued.Store(1 << 20) // over the budget, whatever shed frees

	e.shed(now)
	for s, want := range map[*Stream]state{pastTooSlow: stateAborted, pastRecent: stateOpen, withinTooSlow: stateOpen} {
		if s.state != want {
			t.Errorf("a stream with %d events queued, handed its last ones %v ago: state %v, want %v",
				len(s.queue)+1, time.Duration(now.UnixNano()-s.sending), s.state, want)
		}
	}
	if pastTooSlow.why != EndQueueOverflow || e.counters.Shed.Load() != 1 {
		t.Fatalf("ended for %v, %d shed: want the stream too slow past its bound shed for overflow", pastTooSlow.why, e.counters.Shed.Load())
	}
}
