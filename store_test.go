package mercure_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/storetest"
)

// Tests of the memory store (store.go).

// replayIDs returns the cursor and the ids of the events Replay yields.
func replayIDs(t *testing.T, s mercure.Store, lastEventID string) (string, []string) {
	t.Helper()
	b, ids := storetest.ReplayIDs(t, s, lastEventID)
	return b.Cursor, ids
}

func TestMemoryStore_ReplayAfterWrap(t *testing.T) {
	t.Parallel()
	s := newMemoryStore(t, 600)
	for i := range 1000 {
		if err := s.Append(context.Background(), &mercure.Event{Update: mercure.Update{ID: fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	cursor, got := replayIDs(t, s, "450")
	if cursor != "450" || len(got) != 549 || got[0] != "451" || got[548] != "999" {
		t.Fatalf("cursor %q, replayed %d events from %v to %v", cursor, len(got), got[0], got[len(got)-1])
	}
	if cursor, got := replayIDs(t, s, "100"); cursor != mercure.Earliest || len(got) != 600 || got[0] != "400" {
		t.Fatalf("dropped cursor: %q, %d events from %v", cursor, len(got), got[0])
	}
}

// Appends during a replay, evicting what the replay has not reached yet,
// never make it skip events (REC-4): it yields the page it holds, then
// ends with ErrHistoryGap, so that the hub ends the stream and the
// client resumes from the last event it got.
func TestMemoryStore_ReplayOvertakenByEviction(t *testing.T) {
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
					e := &mercure.Event{Update: mercure.Update{ID: fmt.Sprint(prefix, i), Data: strings.Repeat("d", c.data)}}
					if err := s.Append(ctx, e); err != nil {
						t.Fatal(err)
					}
				}
			}
			appendN("e")
			b, err := s.Replay(ctx, mercure.Earliest)
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
			if !errors.Is(end, mercure.ErrHistoryGap) {
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
func TestMemoryStore_ReplayHoldsAPageOfEvicted(t *testing.T) {
	const size = 512 << 10 // about 1 MiB retained with its encoding
	s := newMemoryStore(t, 1000, mercure.MemoryMaxBytes(32<<20))
	data := strings.Repeat("x", size)
	fill := func(prefix string) {
		for i := range 32 {
			if err := s.Append(context.Background(), &mercure.Event{Update: mercure.Update{ID: fmt.Sprint(prefix, i), Data: data}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill("old")
	b, err := s.Replay(context.Background(), mercure.Earliest)
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

func TestMemoryStore_DuplicateIDSurvivesEviction(t *testing.T) {
	t.Parallel()
	s := newMemoryStore(t, 3)
	for i, id := range []string{"x", "a", "x", "b"} { // the first x is evicted
		_ = s.Append(context.Background(), &mercure.Event{Update: mercure.Update{ID: id, Data: fmt.Sprint(i)}})
	}
	if cursor, got := replayIDs(t, s, "x"); cursor != "x" || strings.Join(got, " ") != "b" {
		t.Fatalf("cursor %q, replayed %v; want x then b", cursor, got)
	}
}

// MemoryMaxBytes bounds the history's memory: the oldest events go first,
// and the latest stays whatever its size. WithHistoryBytes sizes the
// default store, so it conflicts with WithStore.
func TestMemoryStore_MaxBytes(t *testing.T) {
	t.Parallel()
	s := newMemoryStore(t, 100, mercure.MemoryMaxBytes(2000))
	ctx := context.Background()
	for i := range 10 {
		if err := s.Append(ctx, &mercure.Event{Update: mercure.Update{Topics: []string{"t"}, ID: fmt.Sprint(i), Data: strings.Repeat("d", 300)}}); err != nil {
			t.Fatal(err)
		}
	}
	// Each event keeps about 620 bytes (data, encoding, topic, id).
	if _, got := replayIDs(t, s, mercure.Earliest); len(got) != 3 || got[2] != "9" {
		t.Fatalf("retained %v, want the last 3", got)
	}
	if err := s.Append(ctx, &mercure.Event{Update: mercure.Update{Topics: []string{"t"}, ID: "big", Data: strings.Repeat("d", 5000)}}); err != nil {
		t.Fatal(err)
	}
	if _, got := replayIDs(t, s, mercure.Earliest); len(got) != 1 || got[0] != "big" {
		t.Fatalf("after an event over the bound: %v, want it alone", got)
	}
	if _, err := mercure.New(testHubURL, mercure.WithHistoryBytes(1<<20), mercure.WithStore(s)); !errors.Is(err, mercure.ErrInvalidOption) {
		t.Fatalf("WithHistoryBytes with WithStore: %v", err)
	}
}

// The memory store refuses what it cannot honour, like every option.
func TestNewMemoryStore_RejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		size int
		opts []mercure.MemoryOption
	}{
		"negative size":      {-1, nil},
		"negative max bytes": {10, []mercure.MemoryOption{mercure.MemoryMaxBytes(-1)}},
		"nil option":         {10, []mercure.MemoryOption{nil}},
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := mercure.NewMemoryStore(c.size, c.opts...); !errors.Is(err, mercure.ErrInvalidOption) {
				t.Fatalf("NewMemoryStore: store %v, err %v; want ErrInvalidOption", s, err)
			}
		})
	}
}
