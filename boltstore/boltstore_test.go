package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/boltstore"
	"github.com/mercurekit/mercure/storetest"
)

func open(t testing.TB, path string, opts ...boltstore.Option) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(storetest.TempDir(t), "hub.db"))
	})
}

func TestSuiteWithRetention(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(storetest.TempDir(t), "hub.db"), boltstore.WithMaxEvents(100000), boltstore.WithMaxAge(time.Hour))
	})
}

func TestSuiteRetention(t *testing.T) {
	t.Parallel()
	storetest.RunRetention(t, func(t *testing.T, keep int) store.Store {
		return open(t, filepath.Join(storetest.TempDir(t), "hub.db"), boltstore.WithMaxEvents(keep))
	})
}

func appendIDs(t testing.TB, s store.Store, ids ...string) []*store.Event {
	t.Helper()
	var evs []*store.Event
	for _, id := range ids {
		e := storetest.NewEvent(id)
		if err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return evs
}

func replay(t testing.TB, s store.Store, cursor string) (store.Backlog, []*store.Event) {
	t.Helper()
	b, err := s.Replay(context.Background(), cursor)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*store.Event
	for e, err := range b.Events {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return b, evs
}

func idsOf(evs []*store.Event) string {
	var s string
	for _, e := range evs {
		s += e.ID + " "
	}
	return s
}

func TestReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(storetest.TempDir(t), "hub.db")
	s := open(t, path)
	want := appendIDs(t, s, "a", "b", "c")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(context.Background(), storetest.NewEvent("late")); err == nil {
		t.Fatal("Append after Close succeeded")
	}
	s = open(t, path)
	defer s.Close()
	b, got := replay(t, s, "a")
	if b.Cursor != "a" || b.Head != want[2].Seq || idsOf(got) != "b c " {
		t.Fatalf("after reopen: Cursor %q Head %d events %q", b.Cursor, b.Head, idsOf(got))
	}
	for i, e := range got {
		if d := storetest.SameEvent(e, want[i+1]); d != "" {
			t.Errorf("event %d: %s", i, d)
		}
	}
	next := appendIDs(t, s, "d")[0]
	if next.Seq != want[2].Seq+1 {
		t.Fatalf("Seq after reopen %d, want %d", next.Seq, want[2].Seq+1)
	}
}

// A publisher whose answer was lost to a crash (its update committed)
// sends it again to the restarted process: it is recorded once. With
// WithRetryWindow(0), every append is recorded.
func TestRetryAfterReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(storetest.TempDir(t), "hub.db")
	s := open(t, path)
	first := appendIDs(t, s, "order-1")[0]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	again := storetest.RetryOf(first)
	if err := s.Append(context.Background(), again); err != nil || again.Seq != first.Seq {
		t.Fatalf("retry after reopen: Seq %d (%v), want %d", again.Seq, err, first.Seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, boltstore.WithRetryWindow(0))
	defer s.Close()
	again = storetest.RetryOf(first)
	if err := s.Append(context.Background(), again); err != nil || again.Seq == first.Seq {
		t.Fatalf("WithRetryWindow(0): Seq %d (%v), want a new event", again.Seq, err)
	}
	if _, got := replay(t, s, store.Earliest); idsOf(got) != "order-1 order-1 " {
		t.Fatalf("history %q, want the update, then its append without retry window", idsOf(got))
	}
}

// TestLatestID checks that the last event id survives a restart, for the
// store and for a hub started on it (REC-13).
func TestLatestID(t *testing.T) {
	t.Parallel()
	path := filepath.Join(storetest.TempDir(t), "hub.db")
	s := open(t, path)
	if got := s.LatestID(); got != store.Earliest {
		t.Fatalf("new file: LatestID %q", got)
	}
	appendIDs(t, s, "a", "b")
	if got := s.LatestID(); got != "b" {
		t.Fatalf("LatestID %q, want b", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	h, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	if got := h.LastEventID(); got != "b" {
		t.Fatalf("hub on the reopened file: LastEventID %q, want b", got)
	}
}

func TestRetentionByCount(t *testing.T) {
	t.Parallel()
	path := filepath.Join(storetest.TempDir(t), "hub.db")
	s := open(t, path, boltstore.WithMaxEvents(3))
	appendIDs(t, s, "a", "x", "b", "x", "c", "d")
	// Retained: x(4) c d; the oldest retained x is now the second one.
	b, got := replay(t, s, store.Earliest)
	if idsOf(got) != "x c d " || b.Head != 6 {
		t.Fatalf("retained %q Head %d", idsOf(got), b.Head)
	}
	if b, got = replay(t, s, "x"); b.Cursor != "x" || idsOf(got) != "c d " {
		t.Fatalf("cursor x: Cursor %q events %q", b.Cursor, idsOf(got))
	}
	if b, got = replay(t, s, "a"); b.Cursor != store.Earliest || idsOf(got) != "x c d " {
		t.Fatalf("dropped cursor a: Cursor %q events %q", b.Cursor, idsOf(got))
	}
	appendIDs(t, s, "e")
	if b, got = replay(t, s, "x"); b.Cursor != store.Earliest || idsOf(got) != "c d e " {
		t.Fatalf("all x dropped: Cursor %q events %q", b.Cursor, idsOf(got))
	}
	s.Close()
	// The limit also applies at Open.
	s = open(t, path, boltstore.WithMaxEvents(1))
	defer s.Close()
	if _, got = replay(t, s, store.Earliest); idsOf(got) != "e " {
		t.Fatalf("after reopen with limit 1: %q", idsOf(got))
	}
}

func TestRetentionByAge(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	advance := func(d time.Duration) { now.Add(int64(d)) }
	path := filepath.Join(storetest.TempDir(t), "hub.db")
	s := open(t, path, boltstore.WithMaxAge(time.Hour), boltstore.WithClock(clock))
	stamp := func(id string) {
		e := storetest.NewEvent(id)
		e.Time = time.Time{} // the store stamps it with its clock
		if err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		if !e.Time.Equal(clock()) {
			t.Fatalf("Time %v, want %v", e.Time, clock())
		}
	}
	stamp("old1")
	stamp("old2")
	advance(30 * time.Minute)
	stamp("mid")
	advance(45 * time.Minute)
	stamp("new")
	b, got := replay(t, s, store.Earliest)
	if idsOf(got) != "mid new " || b.Head != 4 {
		t.Fatalf("retained %q Head %d", idsOf(got), b.Head)
	}
	advance(2 * time.Hour)
	s.Close()
	s = open(t, path, boltstore.WithMaxAge(time.Hour), boltstore.WithClock(clock))
	defer s.Close()
	b, got = replay(t, s, "mid")
	if len(got) != 0 || b.Head != 4 || b.Cursor != store.Earliest {
		t.Fatalf("all expired: Cursor %q Head %d events %q", b.Cursor, b.Head, idsOf(got))
	}
	if e := appendIDs(t, s, "next")[0]; e.Seq != 5 {
		t.Fatalf("Seq after all expired %d, want 5", e.Seq)
	}
}

// TestReplayLargeHistory checks replays from cursors across page
// boundaries of a large history.
func TestReplayLargeHistory(t *testing.T) {
	t.Parallel()
	const n = 20000
	s := open(t, filepath.Join(storetest.TempDir(t), "hub.db"))
	defer s.Close()
	fill(t, s, n)
	_, all := replay(t, s, store.Earliest)
	if len(all) != n {
		t.Fatalf("earliest: %d events", len(all))
	}
	for i, e := range all {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has Seq %d", i, e.Seq)
		}
	}
	for _, from := range []int{n - 1, n - 2, n - 10, n - 600, n - 5000, 0} {
		cursor := all[from].ID
		b, got := replay(t, s, cursor)
		if b.Cursor != cursor || b.Head != n || len(got) != n-from-1 {
			t.Fatalf("cursor %s: Cursor %q Head %d, %d events", cursor, b.Cursor, b.Head, len(got))
		}
		for i, e := range got {
			if w := all[from+1+i]; e.Seq != w.Seq || e.ID != w.ID {
				t.Fatalf("cursor %s: event %d is %s/%d, want %s/%d", cursor, i, e.ID, e.Seq, w.ID, w.Seq)
			}
		}
	}
}

// fill appends n events with distinct ids from concurrent appenders, so
// that group commit keeps it fast.
func fill(t testing.TB, s store.Store, n int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := s.Append(context.Background(), storetest.NewEvent(fmt.Sprint("e", i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(storetest.TempDir(t), "hub.db"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Append(context.Background(), storetest.NewEvent("a")); err != boltstore.ErrClosed {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := s.Replay(context.Background(), store.Earliest); err != boltstore.ErrClosed {
		t.Fatalf("Replay after Close: %v", err)
	}
}

// TestCluster runs the hub-level contract with three hubs on one file:
// a file is opened once per process, so each hub gets the same handle.
func TestCluster(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(storetest.TempDir(t), "hub.db"))
	storetest.RunCluster(t, func(*testing.T) store.Store { return s })
}
