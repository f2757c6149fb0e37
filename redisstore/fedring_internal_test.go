package redisstore

import (
	"fmt"
	"slices"
	"testing"
)

// The ring keeps the last fedCap entries, newest first from after, and
// forgets those after a Seq, across its wrap-around.
func TestFedRing(t *testing.T) {
	var r fedRing
	total := fedCap + 10
	for i := 1; i <= total; i++ {
		r.add(fmt.Sprintf("%d-0", i), fmt.Sprint("u", i))
	}
	seq := func(ms int) uint64 { return uint64(ms) << seqBits }
	if got, want := r.after(seq(total-3)), []string{fmt.Sprint("u", total), fmt.Sprint("u", total-1), fmt.Sprint("u", total-2)}; !slices.Equal(got, want) {
		t.Fatalf("after the third last: %q, want %q", got, want)
	}
	if got := r.after(0); len(got) != fedCap || got[len(got)-1] != "u11" {
		t.Fatalf("after 0: %d ids ending %q, want the last %d, ending u11", len(got), got[len(got)-1], fedCap)
	}
	r.forget(seq(total - 3))
	if got := r.after(0); len(got) != fedCap-3 || got[0] != fmt.Sprint("u", total-3) {
		t.Fatalf("after forgetting 3: %d ids from %q", len(got), got[0])
	}
	r.add("99999-0", "next")
	if got := r.after(seq(total - 3)); !slices.Equal(got, []string{"next"}) {
		t.Fatalf("after a new entry: %q", got)
	}
	r.forget(0)
	if got := r.after(0); len(got) != 0 {
		t.Fatalf("after forgetting all: %q", got)
	}
}
