package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"
)

func ids(es []store.PassedEvent) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// Passed keeps the last PassedCap events, newest first from After, and
// forgets those after a Seq, across its wrap-around.
func TestPassed(t *testing.T) {
	var p store.Passed
	total := store.PassedCap + 10
	for i := 1; i <= total; i++ {
		p.Add(uint64(i), fmt.Sprint("u", i), time.Time{})
	}
	if got, want := ids(p.After(uint64(total-3))), []string{fmt.Sprint("u", total), fmt.Sprint("u", total-1), fmt.Sprint("u", total-2)}; !slices.Equal(got, want) {
		t.Fatalf("after the third last: %q, want %q", got, want)
	}
	if got := ids(p.After(0)); len(got) != store.PassedCap || got[len(got)-1] != "u11" {
		t.Fatalf("after 0: %d ids ending %q, want the last %d, ending u11", len(got), got[len(got)-1], store.PassedCap)
	}
	p.Forget(uint64(total - 3))
	if got := ids(p.After(0)); len(got) != store.PassedCap-3 || got[0] != fmt.Sprint("u", total-3) {
		t.Fatalf("after forgetting 3: %d ids from %q", len(got), got[0])
	}
	p.Add(99999, "next", time.Time{})
	if got := ids(p.After(uint64(total - 3))); !slices.Equal(got, []string{"next"}) {
		t.Fatalf("after a new event: %q", got)
	}
	p.Forget(0)
	if got := p.After(0); len(got) != 0 {
		t.Fatalf("after forgetting all: %v", got)
	}
}
