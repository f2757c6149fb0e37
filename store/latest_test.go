package store_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/mercurekit/mercure/store"
)

// Concurrent Seen calls in any order leave the event with the highest seq.
func TestLatestKeepsTheLatest(t *testing.T) {
	var l store.Latest
	if id := l.ID(); id != store.Earliest {
		t.Fatalf("a zero Latest has seen %q", id)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 1000; i > 0; i-- { // late ones first: each goroutine goes backwards
				seq := uint64(i*8 + g)
				l.Seen(seq, fmt.Sprint(seq))
			}
		})
	}
	wg.Wait()
	if id := l.ID(); id != fmt.Sprint(1000*8+7) {
		t.Fatalf("ID %q, want %d", id, 1000*8+7)
	}
}

// Rewind moves the latest event back, or to none.
func TestLatestRewind(t *testing.T) {
	var l store.Latest
	l.Seen(9, "lost")
	l.Rewind(4, "kept")
	l.Seen(5, "new")
	if id := l.ID(); id != "new" {
		t.Fatalf("ID %q after a rewind to 4 and an event 5, want new", id)
	}
	l.Rewind(0, "")
	if id := l.ID(); id != store.Earliest {
		t.Fatalf("ID %q after a rewind to an empty history, want %s", id, store.Earliest)
	}
}
