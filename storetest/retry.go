package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"
)

// RetryOf returns what a publisher sends again when it got no answer to
// e: the same update (its slices and pointers copied), accepted anew now.
func RetryOf(e *store.Event) *store.Event {
	r := &store.Event{ID: e.ID, Topics: slices.Clone(e.Topics), Data: e.Data, Private: e.Private, Type: e.Type, Time: time.Now().Round(0)}
	if e.Retry != nil {
		retry := *e.Retry
		r.Retry = &retry
	}
	return r
}

// testRetry: an update appended again, the same id and content within
// the retry window, is recorded and delivered once, and Append reports
// the recorded event's Seq; any difference of content makes it another
// update, recorded whatever its id (REC-7). The store must use
// [store.DefaultRetryWindow].
func testRetry(t *testing.T, s store.Store) {
	var r recorder
	defer s.Listen(store.Listener{Event: r.fn})()
	ctx := context.Background()
	first := NewEvent("retried")
	if err := s.Append(ctx, first); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, s, "between") // a retry need not be the latest event
	for i := range 2 {
		again := RetryOf(first)
		if err := s.Append(ctx, again); err != nil {
			t.Fatalf("retry %d: %v", i, err)
		}
		if again.Seq != first.Seq {
			t.Fatalf("retry %d: Seq %d, want the recorded event's %d", i, again.Seq, first.Seq)
		}
	}
	end := appendIDs(t, s, "end")[0]
	// The feed is in order: had a retry been delivered, it would come
	// before end.
	checkIDs(t, "listener", r.wait(t, 3), "retried", "between", "end")
	if _, got := replay(t, s, store.Earliest); len(got) != 3 || got[0].Seq != first.Seq || got[2].Seq != end.Seq {
		t.Fatalf("history holds %q, want the update once", ids(got))
	}

	late := RetryOf(first)
	late.Time = first.Time.Add(store.DefaultRetryWindow + time.Minute)
	if err := s.Append(ctx, late); err != nil {
		t.Fatal(err)
	}
	if late.Seq <= end.Seq {
		t.Fatalf("the same update past the retry window: Seq %d, want a new one after %d", late.Seq, end.Seq)
	}

	other := time.Minute
	for name, change := range map[string]func(u *store.Event){
		"topics reordered": func(u *store.Event) { u.Topics[0], u.Topics[1] = u.Topics[1], u.Topics[0] },
		"topic added":      func(u *store.Event) { u.Topics = append(u.Topics, "urn:extra") },
		"data":             func(u *store.Event) { u.Data += "!" },
		"private":          func(u *store.Event) { u.Private = !u.Private },
		"type":             func(u *store.Event) { u.Type = "other" },
		"no retry":         func(u *store.Event) { u.Retry = nil },
		"other retry":      func(u *store.Event) { u.Retry = &other },
	} {
		e := RetryOf(first)
		change(e)
		prev := late.Seq
		if err := s.Append(ctx, e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e.Seq <= prev {
			t.Fatalf("same id, %s changed: Seq %d, want a new event after %d", name, e.Seq, prev)
		}
		late = e
	}
	// REC-7 still holds: the cursor is the oldest occurrence.
	if b, got := replay(t, s, "retried"); b.Cursor != "retried" || len(got) != 10 {
		t.Fatalf("replay from the reused id: Cursor %q, %d events %q; want the 10 after the first", b.Cursor, len(got), ids(got))
	}
}

// testConcurrentRetries: the same update appended by several publishers
// at once (a retry racing its first attempt) is recorded once, and every
// Append reports its Seq.
func testConcurrentRetries(t *testing.T, s store.Store) {
	var r recorder
	defer s.Listen(store.Listener{Event: r.fn})()
	e := NewEvent("raced")
	const n = 16
	seqs := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			again := RetryOf(e)
			if err := s.Append(context.Background(), again); err != nil {
				t.Errorf("Append %d: %v", i, err)
			}
			seqs[i] = again.Seq
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, seq := range seqs {
		if seq == 0 || seq != seqs[0] {
			t.Fatalf("Seqs %v: append %d differs", seqs, i)
		}
	}
	appendIDs(t, s, "end")
	checkIDs(t, "listener", r.wait(t, 2), "raced", "end")
	checkIDs(t, "history", collect(t, mustReplay(t, s, store.Earliest)), "raced", "end")
}

func mustReplay(t *testing.T, s store.Store, cursor string) store.Backlog {
	t.Helper()
	b, err := s.Replay(context.Background(), cursor)
	if err != nil {
		t.Fatalf("Replay(%q): %v", cursor, err)
	}
	return b
}
