package storetest

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure/internal/testwait"
)

// PinnedHeap appends n events of size bytes of data each to s, then
// returns how much heap one replay from cursor holds once it has yielded
// its first event (after a garbage collection), and that event. The
// store's feed has delivered the events by then, so that it holds none.
func PinnedHeap(t testing.TB, s store.Store, n, size int, cursor string) (pinned int64, first *store.Event) {
	t.Helper()
	var fed atomic.Int64
	defer s.Listen(store.Listener{Event: func(*store.Event) { fed.Add(1) }})()
	data := strings.Repeat("x", size)
	for i := range n {
		e := NewEvent(fmt.Sprint("big", i))
		e.Data = data
		if err := s.Append(context.Background(), e); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	if !testwait.Within(testwait.Deadline, func() bool { return fed.Load() >= int64(n) }) {
		t.Fatalf("the feed delivered %d of the %d events", fed.Load(), n)
	}
	base := liveHeap()
	b, err := s.Replay(context.Background(), cursor)
	if err != nil {
		t.Fatalf("Replay(%q): %v", cursor, err)
	}
	next, stop := iter.Pull2(b.Events)
	defer stop()
	first, err, ok := next()
	if !ok || err != nil {
		t.Fatalf("Replay(%q) yielded no event (%v)", cursor, err)
	}
	return liveHeap() - base, first
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// testReplayPages: a replay from Earliest or from an unknown cursor of a
// history of large events holds a page of them, not the history, once it
// has yielded its first event: pages are bounded by bytes, not only by
// count. (The memory store's events are in memory anyway: for it this
// case shows nothing, see its own tests.)
func testReplayPages(t *testing.T, open func(t *testing.T) store.Store) {
	// 8 MiB of data, fewer than a page of 512 events: a page bounded by
	// count alone holds all of it, one bounded by bytes (1 MiB in the
	// stores of this module) a quarter of the limit.
	const n, size = 16, 512 << 10
	const limit = 4 << 20
	for _, cursor := range []string{store.Earliest, "unknown cursor"} {
		t.Run(strings.ReplaceAll(cursor, " ", "_"), func(t *testing.T) {
			s := closing(t, open(t))
			pinned, first := PinnedHeap(t, s, n, size, cursor)
			if first.ID != "big0" {
				t.Fatalf("first event %q, want big0", first.ID)
			}
			t.Logf("one replay of %d events of %d KiB holds %.1f MiB", n, size>>10, float64(pinned)/(1<<20))
			if pinned > limit {
				t.Fatalf("one replay holds %.1f MiB of a %d MiB history after one event: its pages are not bounded by bytes (want at most %d MiB)",
					float64(pinned)/(1<<20), n*size>>20, limit>>20)
			}
		})
	}
}
