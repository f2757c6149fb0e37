package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mercurekit/mercure/store"
)

// A listener gets the events appended after it was added, every gap, and
// each change of the feed's state once, the current failure at once.
func TestFanout(t *testing.T) {
	var f store.Fanout
	var early, late []string
	recorder := func(got *[]string) store.Listener {
		return store.Listener{
			Event:  func(e *store.Event) { *got = append(*got, e.ID) },
			Status: func(err error) { *got = append(*got, "status:"+errString(err)) },
		}
	}
	l := recorder(&early)
	l.Gap = func() { early = append(early, "gap") }
	removeEarly := f.Add(l)
	f.Appended(2)
	f.Appended(1) // out of order: 2 stays the highest
	down := errors.New("down")
	f.Status(down)
	f.Status(down) // no change
	f.Add(recorder(&late))
	for seq, id := range []string{"", "a", "b", "c"} {
		if seq > 0 {
			f.Deliver(&store.Event{ID: id, Seq: uint64(seq)})
		}
	}
	f.Gap()
	f.Status(nil)
	removeEarly()
	f.Deliver(&store.Event{ID: "d", Seq: 4})
	if want := []string{"status:down", "a", "b", "c", "gap", "status:"}; !slices.Equal(early, want) {
		t.Fatalf("early listener got %q, want %q", early, want)
	}
	if want := []string{"status:down", "c", "status:", "d"}; !slices.Equal(late, want) {
		t.Fatalf("late listener got %q, want %q", late, want)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// After a rewind, every listener gets the events that follow the new
// head, whatever Seqs it was passed or the store appended before; one
// with Rewound gets it, one without gets a gap instead.
func TestFanoutRewind(t *testing.T) {
	var f store.Fanout
	var with, without []string
	f.Add(store.Listener{
		Event:   func(e *store.Event) { with = append(with, e.ID) },
		Rewound: func(head uint64, id string) { with = append(with, fmt.Sprintf("rewound:%d:%s", head, id)) },
		Gap:     func() { with = append(with, "gap") },
	})
	f.Add(store.Listener{
		Event: func(e *store.Event) { without = append(without, e.ID) },
		Gap:   func() { without = append(without, "gap") },
	})
	f.Deliver(&store.Event{ID: "a", Seq: 1})
	f.Appended(5) // lost with the old primary
	f.Deliver(&store.Event{ID: "b", Seq: 5})
	f.Rewind(1, "a")
	var late []string
	f.Add(store.Listener{Event: func(e *store.Event) { late = append(late, e.ID) }})
	f.Deliver(&store.Event{ID: "c", Seq: 2})
	if want := []string{"a", "b", "rewound:1:a", "c"}; !slices.Equal(with, want) {
		t.Errorf("listener with Rewound got %q, want %q", with, want)
	}
	if want := []string{"a", "b", "gap", "c"}; !slices.Equal(without, want) {
		t.Errorf("listener without Rewound got %q, want %q", without, want)
	}
	if want := []string{"c"}; !slices.Equal(late, want) {
		t.Errorf("listener added after the rewind got %q, want %q", late, want)
	}
}
