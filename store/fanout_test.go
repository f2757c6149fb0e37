package store_test

import (
	"errors"
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
