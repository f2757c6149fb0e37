package fanout_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/mercurekit/mercure/internal/fanout"
)

// A listener gets the events appended after it was added, every gap, and
// each change of the feed's state once, the current failure at once.
func TestListeners(t *testing.T) {
	var ls fanout.Listeners[string]
	var early, late []string
	removeEarly := ls.Add(func(e string) { early = append(early, e) }, func(err error) { early = append(early, "status:"+errString(err)) }, func() { early = append(early, "gap") })
	ls.Appended(2)
	ls.Appended(1) // out of order: 2 stays the highest
	down := errors.New("down")
	ls.Status(down)
	ls.Status(down) // no change
	ls.Add(func(e string) { late = append(late, e) }, func(err error) { late = append(late, "status:"+errString(err)) }, nil)
	for seq, e := range []string{"", "a", "b", "c"} {
		if seq > 0 {
			ls.Deliver(uint64(seq), e)
		}
	}
	ls.Gap()
	ls.Status(nil)
	removeEarly()
	ls.Deliver(4, "d")
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
