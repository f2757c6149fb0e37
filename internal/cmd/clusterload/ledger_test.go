package main

import (
	"slices"
	"testing"
	"time"
)

// at returns t0 plus s seconds.
func at(s float64) time.Time {
	return time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
}

// Recovery counts from the event to the acknowledgement of the first
// publish sent after it: an attempt sent before the event and answered
// after it does not count (the hub may have recorded it before); only
// the event's hub counts when it names one; the attempts refused between
// the event and the recovery are counted.
func TestRecovery(t *testing.T) {
	attempts := []attempt{
		{hub: "A", sent: at(9.9), done: at(10.5), ok: true}, // sent before
		{hub: "A", sent: at(10.1), done: at(10.4)},          // refused
		{hub: "B", sent: at(10.2), done: at(10.6), ok: true},
		{hub: "A", sent: at(10.3), done: at(11), ok: true},
		{hub: "A", sent: at(10.5), done: at(12)}, // refused after the recovery
		{hub: "A", sent: at(9), done: at(9.5)},   // refused before
	}
	if d, refused := recovery(event{at: at(10)}, attempts); d != 600*time.Millisecond || refused != 1 {
		t.Errorf("either hub: recovered after %v, %d refused; want 600ms, 1", d, refused)
	}
	if d, refused := recovery(event{at: at(10), hub: "A"}, attempts); d != time.Second || refused != 1 {
		t.Errorf("hub A: recovered after %v, %d refused; want 1s, 1", d, refused)
	}
	if d, refused := recovery(event{at: at(11.5), hub: "A"}, attempts); d != -1 || refused != 1 {
		t.Errorf("never: recovered after %v, %d refused; want -1, 1", d, refused)
	}
}

// An update acknowledged and missing from the store is charged to the
// first store event after its acknowledgement, not to a hub's stop; an
// update stored twice and the gaps to the window they fall in.
func TestAnalyze(t *testing.T) {
	events := []event{{name: "warm-up", at: at(0)}, {name: "hub-stop", at: at(10)},
		{name: "replica-kill", at: at(20), store: true}, {name: "primary-kill", at: at(30), store: true}}
	acked := map[string]time.Time{"a": at(1), "b": at(12), "c": at(25), "d": at(29.9), "e": at(31)}
	stored := []string{"a", "b", "e", "e"} // c and d lost, e twice
	gaps := []time.Time{at(30.5), at(31), at(5)}
	stats, lost, dup := analyze(events, nil, acked, stored, gaps)
	slices.Sort(lost)
	if !slices.Equal(lost, []string{"c", "d"}) || !slices.Equal(dup, []string{"e"}) {
		t.Fatalf("lost %q, duplicated %q; want [c d], [e]", lost, dup)
	}
	want := []struct{ acked, lost, dup, gaps int }{{1, 0, 0, 1}, {1, 0, 0, 0}, {2, 0, 0, 0}, {1, 2, 1, 2}}
	for i, w := range want {
		s := stats[i]
		if s.acked != w.acked || s.lost != w.lost || s.duplicated != w.dup || s.gaps != w.gaps {
			t.Errorf("%s: acked %d lost %d duplicated %d gaps %d; want %+v", s.name, s.acked, s.lost, s.duplicated, s.gaps, w)
		}
	}
}

// A loss after the last store event (none should happen) is charged to
// the window it falls in.
func TestLoserWithoutLaterStoreEvent(t *testing.T) {
	events := []event{{name: "warm-up", at: at(0)}, {name: "store-kill", at: at(10), store: true}, {name: "x", at: at(20)}}
	if i := loser(events, at(25)); i != 2 {
		t.Errorf("charged to event %d, want 2", i)
	}
	if i := loser(events, at(5)); i != 1 {
		t.Errorf("charged to event %d, want 1", i)
	}
}
