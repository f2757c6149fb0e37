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
		e.streams[s] = struct{}{}
	}
	e.life.Unlock()
	defer func() {
		e.life.Lock()
		for _, s := range []*Stream{open, timedOut, ending} {
			delete(e.streams, s)
		}
		e.life.Unlock()
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
