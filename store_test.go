package mercure_test

import (
	"context"
	"errors"
	"fmt"
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
// must not open a gap in it (REC-4).
func TestMemoryStore_ReplayHasNoGapUnderEviction(t *testing.T) {
	s := newMemoryStore(t, 300)
	ctx := context.Background()
	for i := range 300 {
		_ = s.Append(ctx, &mercure.Event{Update: mercure.Update{ID: fmt.Sprint(i)}})
	}
	b, err := s.Replay(ctx, mercure.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	var prev uint64
	for e := range b.Events {
		if prev == 0 {
			for i := range 600 { // evicts every event the replay has still to yield
				_ = s.Append(ctx, &mercure.Event{Update: mercure.Update{ID: fmt.Sprint("late", i)}})
			}
		} else if e.Seq != prev+1 {
			t.Fatalf("gap in replay: %d then %d", prev, e.Seq)
		}
		prev = e.Seq
	}
	if prev != 300 {
		t.Fatalf("replay ended at %d, want 300", prev)
	}
}

func TestMemoryStore_DuplicateIDSurvivesEviction(t *testing.T) {
	s := newMemoryStore(t, 3)
	for _, id := range []string{"x", "a", "x", "b"} { // the first x is evicted
		_ = s.Append(context.Background(), &mercure.Event{Update: mercure.Update{ID: id}})
	}
	if cursor, got := replayIDs(t, s, "x"); cursor != "x" || strings.Join(got, " ") != "b" {
		t.Fatalf("cursor %q, replayed %v; want x then b", cursor, got)
	}
}

// MemoryMaxBytes bounds the history's memory: the oldest events go first,
// and the latest stays whatever its size. WithHistoryBytes sizes the
// default store, so it conflicts with WithStore.
func TestMemoryStore_MaxBytes(t *testing.T) {
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
