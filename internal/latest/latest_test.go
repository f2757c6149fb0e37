package latest_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/mercurekit/mercure/internal/latest"
)

// Concurrent Seen calls in any order leave the event with the highest seq.
func TestSeenKeepsTheLatest(t *testing.T) {
	var l latest.Event
	if _, ok := l.ID(); ok {
		t.Fatal("a zero Event has seen an event")
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
	if id, ok := l.ID(); !ok || id != fmt.Sprint(1000*8+7) {
		t.Fatalf("ID %q, %v; want %d", id, ok, 1000*8+7)
	}
}
