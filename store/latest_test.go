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
