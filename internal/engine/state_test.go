package engine

import (
	"fmt"
	"testing"
	"time"
)

// The stream's state machine, as a table: from each state, each event,
// the state it leaves the stream in, the reason recorded, and what it does
// with the queue and the events that follow. A stream moves forward only
// (open → ending → finished, or → aborted → finished), and the first
// reason given for leaving open is the reason it ended.
func TestStreamStates(t *testing.T) {
	type outcome struct {
		state    state
		why      EndReason
		farewell bool // a farewell is to be written last
		queued   int  // events in the queue after the event
		accepts  bool // an event offered next is queued
	}
	events := []struct {
		name  string
		apply func(s *Stream)
	}{
		{"End", func(s *Stream) { s.End(EndShutdown, []byte("retry: 1000\n\n")) }},
		{"abort", func(s *Stream) { s.abort(EndWriteError) }},
		{"setEnd", func(s *Stream) { s.setEnd(EndHistoryGap) }},
		{"enqueue", func(s *Stream) { s.enqueue(testEvent(2), time.Now().UnixNano()) }},
		{"enqueue past the queue's bound", func(s *Stream) {
			for i := range s.e.cfg.Limits.QueueEvents + 1 {
				s.enqueue(testEvent(uint64(10+i)), time.Now().UnixNano())
			}
		}},
	}
	// Each initial state holds one queued event, and the reason it left
	// open with (none for open).
	initial := []struct {
		state state
		why   EndReason
	}{{stateOpen, EndUnset}, {stateEnding, EndRevoked}, {stateAborted, EndQueueOverflow}, {stateFinished, EndClientGone}}
	queueEvents := testConfig(t).Limits.QueueEvents
	want := map[state]map[string]outcome{
		stateOpen: {
			"End":                            {stateEnding, EndShutdown, true, 1, false},
			"abort":                          {stateAborted, EndWriteError, false, 0, false},
			"setEnd":                         {stateOpen, EndHistoryGap, false, 1, true},
			"enqueue":                        {stateOpen, EndUnset, false, 2, true},
			"enqueue past the queue's bound": {stateAborted, EndQueueOverflow, false, 0, false},
		},
		stateEnding: {
			"End":                            {stateEnding, EndRevoked, false, 1, false},
			"abort":                          {stateAborted, EndRevoked, false, 0, false},
			"setEnd":                         {stateEnding, EndRevoked, false, 1, false},
			"enqueue":                        {stateEnding, EndRevoked, false, 1, false},
			"enqueue past the queue's bound": {stateEnding, EndRevoked, false, 1, false},
		},
		stateAborted: {
			"End":                            {stateAborted, EndQueueOverflow, false, 0, false},
			"abort":                          {stateAborted, EndQueueOverflow, false, 0, false},
			"setEnd":                         {stateAborted, EndQueueOverflow, false, 0, false},
			"enqueue":                        {stateAborted, EndQueueOverflow, false, 0, false},
			"enqueue past the queue's bound": {stateAborted, EndQueueOverflow, false, 0, false},
		},
		stateFinished: {
			"End":                            {stateFinished, EndClientGone, false, 0, false},
			"abort":                          {stateFinished, EndClientGone, false, 0, false},
			"setEnd":                         {stateFinished, EndClientGone, false, 0, false},
			"enqueue":                        {stateFinished, EndClientGone, false, 0, false},
			"enqueue past the queue's bound": {stateFinished, EndClientGone, false, 0, false},
		},
	}
	for _, init := range initial {
		for _, ev := range events {
			t.Run(fmt.Sprintf("%v/%s", init.state, ev.name), func(t *testing.T) {
				e := newEngine(t, nil)
				s := e.newStream(newRecorder(), Spec{Owner: &owner{}, Client: "c"})
				if init.state != stateFinished && init.state != stateAborted {
					s.queue, s.queueBytes = []*Event{testEvent(1)}, len(testEvent(1).Bytes)
				}
				s.state, s.why = init.state, init.why
				ev.apply(s)
				w := want[init.state][ev.name]
				s.mu.Lock()
				got := outcome{state: s.state, why: s.why, farewell: s.farewell != nil, queued: len(s.queue)}
				s.mu.Unlock()
				_, ok, _ := s.enqueue(testEvent(1000), time.Now().UnixNano())
				s.mu.Lock()
				got.accepts = ok && len(s.queue) > got.queued
				s.mu.Unlock()
				if got != w {
					t.Fatalf("got %+v, want %+v", got, w)
				}
				if ev.name == "enqueue past the queue's bound" && init.state == stateOpen && queueEvents <= 0 {
					t.Fatal("the queue has no bound")
				}
			})
		}
	}
}

// testEvent is an event of seq, encoded.
func testEvent(seq uint64) *Event {
	return &Event{Seq: seq, ID: fmt.Sprint("e", seq), Topics: []string{"x"}, Bytes: []byte(fmt.Sprintf("id: e%d\ndata: x\n\n", seq))}
}

func (s state) String() string {
	return [...]string{"open", "ending", "aborted", "finished"}[s]
}
