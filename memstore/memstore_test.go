package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/storetest"
)

// replayIDs returns the cursor and the ids of the events Replay yields.
func replayIDs(t *testing.T, s store.Store, lastEventID string) (string, []string) {
	t.Helper()
	b, ids := storetest.ReplayIDs(t, s, lastEventID)
	return b.Cursor, ids
}

func TestReplayAfterWrap(t *testing.T) {
	t.Parallel()
	s := newMemoryStore(t, 600)
	for i := range 1000 {
		if err := s.Append(context.Background(), &store.Event{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cursor, got := replayIDs(t, s, "450")
	if cursor != "450" || len(got) != 549 || got[0] != "451" || got[548] != "999" {
		t.Fatalf("cursor %q, replayed %d events from %v to %v", cursor, len(got), got[0], got[len(got)-1])
	}
	if cursor, got := replayIDs(t, s, "100"); cursor != store.Earliest || len(got) != 600 || got[0] != "400" {
		t.Fatalf("dropped cursor: %q, %d events from %v", cursor, len(got), got[0])
	}
}

// Appends during a replay, evicting what the replay has not reached yet,
// never make it skip events (REC-4): it yields the page it holds, then
// ends with ErrHistoryGap, so that the hub ends the stream and the
// client resumes from the last event it got.
func TestReplayOvertakenByEviction(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		size, data int
		page       int // events in the first page
	}{
		{"small events: a page of 512", 2000, 0, 512},
		{"large events: a page of about 1 MiB", 100, 100 << 10, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newMemoryStore(t, c.size)
			ctx := context.Background()
			appendN := func(prefix string) {
				for i := range c.size {
					e := &store.Event{ID: fmt.Sprint(prefix, i), Data: strings.Repeat("d", c.data)}
					if err := s.Append(ctx, e); err != nil {
						t.Fatal(err)
					}
				}
			}
			appendN("e")
			b, err := s.Replay(ctx, store.Earliest)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			var end error
			for e, err := range b.Events {
				if err != nil {
					end = err
					break
				}
				if len(got) == 0 {
					appendN("late") // evicts every event of the replay
				}
				got = append(got, e.Seq)
			}
			if !errors.Is(end, store.ErrHistoryGap) {
				t.Fatalf("replay ended with %v after %d events, want ErrHistoryGap", end, len(got))
			}
			if len(got) != c.page || got[0] != 1 || got[len(got)-1] != uint64(c.page) {
				t.Fatalf("replay yielded Seqs %d to %d (%d events), want 1 to %d", got[0], got[len(got)-1], len(got), c.page)
			}
		})
	}
}

// A replay holds at most a page of the events evicted under it: a slow
// reader of a history of large events does not keep that history alive
// once publishers have replaced it.
func TestReplayHoldsAPageOfEvicted(t *testing.T) {
	const size = 512 << 10 // about 1 MiB retained with its encoding
	s := newMemoryStore(t, 1000, memstore.WithMaxBytes(32<<20))
	data := strings.Repeat("x", size)
	fill := func(prefix string) {
		for i := range 32 {
			if err := s.Append(context.Background(), &store.Event{ID: fmt.Sprint(prefix, i), Data: data}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill("old")
	b, err := s.Replay(context.Background(), store.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iter.Pull2(b.Events)
	if _, err, ok := next(); !ok || err != nil {
		t.Fatalf("no first event: %v", err)
	}
	fill("new") // evicts every old event
	withReader := liveHeap()
	stop()
	pinned := withReader - liveHeap()
	runtime.KeepAlive(s) // the store's own history is not the reader's
	t.Logf("a replay holds %.1f MiB of a 32 MiB history evicted under it", float64(pinned)/(1<<20))
	if pinned > 8<<20 {
		t.Fatalf("a replay holds %.1f MiB of evicted events, want at most a page (about 1 MiB)", float64(pinned)/(1<<20))
	}
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func TestDuplicateIDSurvivesEviction(t *testing.T) {
	t.Parallel()
	s := newMemoryStore(t, 3)
	for i, id := range []string{"x", "a", "x", "b"} { // the first x is evicted
		_ = s.Append(context.Background(), &store.Event{ID: id, Data: fmt.Sprint(i)})
	}
	if cursor, got := replayIDs(t, s, "x"); cursor != "x" || strings.Join(got, " ") != "b" {
		t.Fatalf("cursor %q, replayed %v; want x then b", cursor, got)
	}
}

// WithMaxBytes bounds the history's memory: the oldest events go first,
// and the latest stays whatever its size.
func TestMaxBytes(t *testing.T) {
	t.Parallel()
	s := newMemoryStore(t, 100, memstore.WithMaxBytes(2000))
	ctx := context.Background()
	for i := range 10 {
		if err := s.Append(ctx, &store.Event{Topics: []string{"t"}, ID: fmt.Sprint(i), Data: strings.Repeat("d", 300)}); err != nil {
			t.Fatal(err)
		}
	}
	// Each event keeps about 620 bytes (data, encoding, topic, id).
	if _, got := replayIDs(t, s, store.Earliest); len(got) != 3 || got[2] != "9" {
		t.Fatalf("retained %v, want the last 3", got)
	}
	if err := s.Append(ctx, &store.Event{Topics: []string{"t"}, ID: "big", Data: strings.Repeat("d", 5000)}); err != nil {
		t.Fatal(err)
	}
	if _, got := replayIDs(t, s, store.Earliest); len(got) != 1 || got[0] != "big" {
		t.Fatalf("after an event over the bound: %v, want it alone", got)
	}
}

// The memory store refuses what it cannot honour, like every option.
func TestNew_RejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]memstore.Option{
		"negative max events":   memstore.WithMaxEvents(-1),
		"negative max bytes":    memstore.WithMaxBytes(-1),
		"negative retry window": memstore.WithRetryWindow(-time.Second),
		"nil option":            nil,
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := memstore.New(opt); !errors.Is(err, mercure.ErrInvalidOption) {
				t.Fatalf("New: store %v, err %v; want ErrInvalidOption", s, err)
			}
		})
	}
}

// newMemoryStore returns a memory store keeping size events, whatever
// their size unless opts say otherwise.
func newMemoryStore(t testing.TB, size int, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(append([]memstore.Option{memstore.WithMaxEvents(size), memstore.WithMaxBytes(0)}, opts...)...)
	if err != nil {
		t.Fatalf("memstore.New: %v", err)
	}
	return s
}
