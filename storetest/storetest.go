// Package storetest is a behavioural test suite shared by every
// [store.Store] implementation.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure/internal/alone"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Run runs the suite. open returns a fresh, empty store, with the default
// retry window ([store.DefaultRetryWindow]) and a retention of at least
// a few thousand events; when the store implements io.Closer, Run closes
// it when the subtest ends. A store that drops old events should pass
// [RunRetention] too, and a store on the network [RunOutage].
//
// The cases run in parallel with each other, so each call of open must
// return a store of its own (its own key, prefix or file). One case
// measures the process's live heap (a replay's pages are bounded by
// bytes): so that no other test allocates meanwhile, it runs in a child
// process of the test binary that runs that case and nothing else (the
// test that calls Run, from its beginning, after the package's TestMain,
// with its -short, -v and -timeout flags). Run may thus be called from a
// parallel test. With -short, the case of the seam between a replay and
// live events appends 200 events instead of 2 000.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	fresh := func(t *testing.T) store.Store {
		t.Helper()
		return closing(t, open(t))
	}
	t.Run("ReplayPagesBoundedByBytes", func(t *testing.T) {
		if alone.InProcess(t) {
			testReplayPages(t, open)
		}
	})
	runParallel(t, "AppendAssignsIncreasingSeq", func(t *testing.T) { testAppendSeq(t, fresh(t)) })
	runParallel(t, "RoundTrip", func(t *testing.T) { testRoundTrip(t, fresh(t)) })
	runParallel(t, "ReplayAfterCursor", func(t *testing.T) { testReplayCursor(t, fresh(t)) })
	runParallel(t, "ReplayEarliest", func(t *testing.T) { testReplayEarliest(t, fresh(t)) })
	runParallel(t, "ReplayUnknownCursor", func(t *testing.T) { testReplayUnknown(t, fresh(t)) })
	runParallel(t, "ReplayDuplicateIDs", func(t *testing.T) { testDuplicates(t, fresh(t)) })
	runParallel(t, "ReplayHead", func(t *testing.T) { testHead(t, fresh(t)) })
	runParallel(t, "Listen", func(t *testing.T) { testListen(t, fresh(t)) })
	runParallel(t, "ConcurrentAppends", func(t *testing.T) { testConcurrent(t, fresh(t)) })
	runParallel(t, "ReplayLiveSeam", func(t *testing.T) { testSeam(t, fresh(t)) })
	runParallel(t, "AppendIgnoresCancellation", func(t *testing.T) { testAppendCancelled(t, fresh(t)) })
	runParallel(t, "RetryRecordedOnce", func(t *testing.T) { testRetry(t, fresh(t)) })
	runParallel(t, "ConcurrentRetriesRecordedOnce", func(t *testing.T) { testConcurrentRetries(t, fresh(t)) })
	// The optional interfaces, when the store implements them.
	runParallel(t, "LatestID", func(t *testing.T) {
		s, ok := fresh(t).(store.LatestStore)
		if !ok {
			t.Skip("not a store.LatestStore")
		}
		testLatestID(t, s)
	})
	runParallel(t, "Subscriptions", func(t *testing.T) {
		s, ok := fresh(t).(store.SubscriptionStore)
		if !ok {
			t.Skip("not a store.SubscriptionStore")
		}
		testSubscriptions(t, s)
	})
}

// runParallel runs f as t's subtest name, in parallel with t's other
// parallel subtests.
func runParallel(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		f(t)
	})
}

// closing returns s, closed when t ends if it is an io.Closer.
func closing(t *testing.T, s store.Store) store.Store {
	t.Helper()
	if c, ok := s.(io.Closer); ok {
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	return s
}

func testLatestID(t *testing.T, s store.LatestStore) {
	if got := s.LatestID(); got != store.Earliest {
		t.Fatalf("empty store: LatestID %q, want %q", got, store.Earliest)
	}
	appendIDs(t, s, "l1", "l2", "l1") // two updates with one id
	if got := s.LatestID(); got != "l1" {
		t.Fatalf("LatestID %q after l1 l2 l1, want l1", got)
	}
}

// testSubscriptions checks that a store lists the subscriptions it was
// told of once UpdateSubscriptions returns, replaces one reported again,
// and forgets one reported inactive.
func testSubscriptions(t *testing.T, s store.SubscriptionStore) {
	ctx := context.Background()
	sub := func(id, match string, active bool) store.Subscription {
		s := store.Subscription{ID: id, Active: active}
		if active {
			s.JSON = []byte(`{"id":"` + id + `","match":"` + match + `","payload":{"n":1}}`)
		}
		return s
	}
	list := func() map[string]store.Subscription {
		t.Helper()
		subs, err := s.Subscriptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := make(map[string]store.Subscription)
		for _, x := range subs {
			if _, dup := m[x.ID]; dup {
				t.Fatalf("%s listed twice", x.ID)
			}
			m[x.ID] = x
		}
		return m
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("fresh store lists %v", got)
	}
	if err := s.UpdateSubscriptions(ctx, []store.Subscription{sub("a", "x", true), sub("b", "y", true)}); err != nil {
		t.Fatal(err)
	}
	// The documents come back as they were given, the same JSON values.
	got := list()
	if len(got) != 2 || !sameJSON(got["a"], sub("a", "x", true)) || !sameJSON(got["b"], sub("b", "y", true)) {
		t.Fatalf("after adding a and b: %+v", got)
	}
	if err := s.UpdateSubscriptions(ctx, []store.Subscription{sub("a", "z", true), sub("b", "y", false)}); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 1 || !sameJSON(got["a"], sub("a", "z", true)) {
		t.Fatalf("after replacing a and removing b: %+v", got)
	}
}

// sameJSON reports whether a store listed got as want: active, the same
// id, and the same JSON value.
func sameJSON(got, want store.Subscription) bool {
	var g, w any
	return got.ID == want.ID && got.Active && json.Unmarshal(got.JSON, &g) == nil &&
		json.Unmarshal(want.JSON, &w) == nil && reflect.DeepEqual(g, w)
}

// eventN numbers the events of NewEvent.
var eventN atomic.Int64

// NewEvent returns an event with every Update field set, derived from id.
// Its Data differs from call to call: two events of NewEvent with the
// same id are two updates, not a retry (see [store.Store.Append]).
func NewEvent(id string) *store.Event {
	retry := time.Duration(len(id)+1) * time.Millisecond
	return &store.Event{
		Topics:  []string{"https://example.com/" + id, "urn:alt:" + id},
		Data:    fmt.Sprintf("data of %s #%d\nline 2", id, eventN.Add(1)),
		Private: len(id)%2 == 0,
		ID:      id,
		Type:    "type-" + id,
		Retry:   &retry,
		Time:    time.Now().Round(0),
	}
}

func appendIDs(t *testing.T, s store.Store, ids ...string) []*store.Event {
	t.Helper()
	var evs []*store.Event
	for _, id := range ids {
		e := NewEvent(id)
		if err := s.Append(context.Background(), e); err != nil {
			t.Fatalf("Append(%q): %v", id, err)
		}
		evs = append(evs, e)
	}
	return evs
}

// collect drains a backlog.
func collect(t *testing.T, b store.Backlog) []*store.Event {
	t.Helper()
	var evs []*store.Event
	for e, err := range b.Events {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		evs = append(evs, e)
	}
	return evs
}

func replay(t *testing.T, s store.Store, cursor string) (store.Backlog, []*store.Event) {
	t.Helper()
	b, err := s.Replay(context.Background(), cursor)
	if err != nil {
		t.Fatalf("Replay(%q): %v", cursor, err)
	}
	return b, collect(t, b)
}

// ReplayIDs replays s from cursor and returns the backlog and the ids of
// the events it yields, failing t on any error.
func ReplayIDs(t *testing.T, s store.Store, cursor string) (store.Backlog, []string) {
	t.Helper()
	b, evs := replay(t, s, cursor)
	return b, ids(evs)
}

func ids(evs []*store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func checkIDs(t *testing.T, what string, got []*store.Event, want ...string) {
	t.Helper()
	if g := ids(got); !slices.Equal(g, want) {
		t.Fatalf("%s: ids %q, want %q", what, g, want)
	}
}

// SameEvent reports how got differs from want, or "" when its Update
// fields, Seq and Time are equal.
func SameEvent(got, want *store.Event) string {
	switch {
	case !slices.Equal(got.Topics, want.Topics):
		return fmt.Sprintf("Topics %q, want %q", got.Topics, want.Topics)
	case got.Data != want.Data:
		return fmt.Sprintf("Data %q, want %q", got.Data, want.Data)
	case got.Private != want.Private:
		return fmt.Sprintf("Private %v, want %v", got.Private, want.Private)
	case got.ID != want.ID:
		return fmt.Sprintf("ID %q, want %q", got.ID, want.ID)
	case got.Type != want.Type:
		return fmt.Sprintf("Type %q, want %q", got.Type, want.Type)
	case (got.Retry == nil) != (want.Retry == nil) || got.Retry != nil && *got.Retry != *want.Retry:
		return fmt.Sprintf("Retry %v, want %v", got.Retry, want.Retry)
	case got.Seq != want.Seq:
		return fmt.Sprintf("Seq %d, want %d", got.Seq, want.Seq)
	case !got.Time.Equal(want.Time):
		return fmt.Sprintf("Time %v, want %v", got.Time, want.Time)
	}
	return ""
}

// recorder is a listener that records what it receives.
type recorder struct {
	mu  sync.Mutex
	evs []*store.Event
	n   atomic.Int64
}

func (r *recorder) fn(e *store.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
	r.n.Add(1)
}

func (r *recorder) events() []*store.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// wait waits until r has received at least n events.
func (r *recorder) wait(t *testing.T, n int) []*store.Event {
	t.Helper()
	if !testwait.Within(testwait.Deadline, func() bool { return r.n.Load() >= int64(n) }) {
		t.Fatalf("listener got %d events, want %d", r.n.Load(), n)
	}
	return r.events()
}

func testAppendSeq(t *testing.T, s store.Store) {
	var r recorder
	defer s.Listen(store.Listener{Event: r.fn})()
	evs := appendIDs(t, s, "a", "b", "c", "d", "e")
	got := r.wait(t, len(evs))
	var prev uint64
	for i, e := range got {
		if e.Seq == 0 || e.Seq <= prev {
			t.Fatalf("listener event %d has Seq %d after %d", i, e.Seq, prev)
		}
		prev = e.Seq
		if e.Seq != evs[i].Seq {
			t.Fatalf("listener event %d has Seq %d, Append set %d", i, e.Seq, evs[i].Seq)
		}
	}
}

func testRoundTrip(t *testing.T, s store.Store) {
	var r recorder
	defer s.Listen(store.Listener{Event: r.fn})()
	evs := appendIDs(t, s, "e1", "e22", "e333")
	noRetry := NewEvent("e4444")
	noRetry.Retry, noRetry.Type, noRetry.Topics = nil, "", []string{"only"}
	if err := s.Append(context.Background(), noRetry); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, noRetry)
	live := r.wait(t, len(evs))
	_, replayed := replay(t, s, store.Earliest)
	if len(replayed) != len(evs) {
		t.Fatalf("replayed %d events, want %d", len(replayed), len(evs))
	}
	for i := range evs {
		if d := SameEvent(replayed[i], evs[i]); d != "" {
			t.Errorf("replayed event %d: %s", i, d)
		}
		if d := SameEvent(live[i], evs[i]); d != "" {
			t.Errorf("live event %d: %s", i, d)
		}
	}
}

func testReplayCursor(t *testing.T, s store.Store) {
	appendIDs(t, s, "e1", "e2", "e3")
	b, got := replay(t, s, "e1")
	if b.Cursor != "e1" {
		t.Errorf("Cursor %q, want e1", b.Cursor)
	}
	checkIDs(t, "cursor e1", got, "e2", "e3")
	b, got = replay(t, s, "e3")
	if b.Cursor != "e3" {
		t.Errorf("Cursor %q, want e3", b.Cursor)
	}
	checkIDs(t, "cursor e3", got)
}

func testReplayEarliest(t *testing.T, s store.Store) {
	b, got := replay(t, s, store.Earliest)
	if b.Cursor != store.Earliest || len(got) != 0 {
		t.Fatalf("empty store: Cursor %q, %d events", b.Cursor, len(got))
	}
	appendIDs(t, s, "e1", "e2", "e3")
	b, got = replay(t, s, store.Earliest)
	if b.Cursor != store.Earliest {
		t.Errorf("Cursor %q, want earliest", b.Cursor)
	}
	checkIDs(t, "earliest", got, "e1", "e2", "e3")
}

func testReplayUnknown(t *testing.T, s store.Store) {
	b, got := replay(t, s, "zz")
	if b.Cursor != store.Earliest || len(got) != 0 {
		t.Fatalf("empty store: Cursor %q, %d events", b.Cursor, len(got))
	}
	appendIDs(t, s, "e1", "e2", "e3")
	b, got = replay(t, s, "zz")
	if b.Cursor != store.Earliest {
		t.Errorf("Cursor %q, want earliest", b.Cursor)
	}
	checkIDs(t, "unknown cursor", got, "e1", "e2", "e3")
	b, got = replay(t, s, "")
	if b.Cursor != store.Earliest {
		t.Errorf("empty cursor: Cursor %q, want earliest", b.Cursor)
	}
	checkIDs(t, "empty cursor", got, "e1", "e2", "e3")
}

func testDuplicates(t *testing.T, s store.Store) {
	appendIDs(t, s, "a", "x", "b", "x", "c")
	b, got := replay(t, s, "x")
	if b.Cursor != "x" {
		t.Errorf("Cursor %q, want x", b.Cursor)
	}
	checkIDs(t, "cursor x", got, "b", "x", "c")
}

func testHead(t *testing.T, s store.Store) {
	b, _ := replay(t, s, store.Earliest)
	if b.Head != 0 {
		t.Fatalf("empty store: Head %d, want 0", b.Head)
	}
	evs := appendIDs(t, s, "h1", "h2", "h3")
	b, err := s.Replay(context.Background(), "h1")
	if err != nil {
		t.Fatal(err)
	}
	if want := evs[2].Seq; b.Head != want {
		t.Fatalf("Head %d, want %d", b.Head, want)
	}
	later := appendIDs(t, s, "h4", "h5")
	got := collect(t, b)
	// The events that existed come first; a lazily iterating store may
	// continue with later ones, in order and without a gap.
	want := append(slices.Clone(evs[1:]), later...)
	if len(got) < 2 || len(got) > len(want) {
		t.Fatalf("replay yielded %q, want a prefix of %q with at least h2 h3", ids(got), ids(want))
	}
	for i, e := range got {
		if e.Seq != want[i].Seq || e.ID != want[i].ID {
			t.Fatalf("replay yielded %q (event %d Seq %d), want a prefix of %q", ids(got), i, e.Seq, ids(want))
		}
	}
}

func testListen(t *testing.T, s store.Store) {
	appendIDs(t, s, "before")
	var r1, r2 recorder
	cancel1 := s.Listen(store.Listener{Event: r1.fn})
	cancel2 := s.Listen(store.Listener{Event: r2.fn})
	defer cancel2()
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint("l", i))
	}
	evs := appendIDs(t, s, want...)
	for _, r := range []*recorder{&r1, &r2} {
		got := r.wait(t, len(want))
		checkIDs(t, "listener", got, want...)
		for i := range got {
			if got[i].Seq != evs[i].Seq {
				t.Fatalf("listener event %d Seq %d, want %d", i, got[i].Seq, evs[i].Seq)
			}
		}
	}
	cancel1()
	// A store passes an event to every listener before the next: once
	// the second listener has after3, whatever after1 and after2 would
	// have given the cancelled one has come.
	appendIDs(t, s, "after1", "after2", "after3")
	r2.wait(t, len(want)+3)
	if n := r1.n.Load(); n != int64(len(want)) {
		t.Fatalf("cancelled listener got %d events, want %d", n, len(want))
	}
	checkIDs(t, "second listener", r2.events(), append(want, "after1", "after2", "after3")...)
}

func testConcurrent(t *testing.T, s store.Store) {
	const writers, per = 8, 200
	var r recorder
	defer s.Listen(store.Listener{Event: r.fn})()
	var wg sync.WaitGroup
	seqs := make([][]uint64, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				e := NewEvent(fmt.Sprintf("w%d-%d", w, i))
				if err := s.Append(context.Background(), e); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				seqs[w] = append(seqs[w], e.Seq)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[uint64]bool{}
	for w := range writers {
		for i, seq := range seqs[w] {
			if seq == 0 || seen[seq] || i > 0 && seq <= seqs[w][i-1] {
				t.Fatalf("writer %d append %d: Seq %d is zero, repeated or not increasing", w, i, seq)
			}
			seen[seq] = true
		}
	}
	live := r.wait(t, writers*per)
	if len(live) != writers*per {
		t.Fatalf("listener got %d events, want %d", len(live), writers*per)
	}
	for i := 1; i < len(live); i++ {
		if live[i].Seq <= live[i-1].Seq {
			t.Fatalf("listener event %d Seq %d after %d", i, live[i].Seq, live[i-1].Seq)
		}
	}
	_, replayed := replay(t, s, store.Earliest)
	if len(replayed) != len(live) {
		t.Fatalf("replayed %d events, want %d", len(replayed), len(live))
	}
	for i := range live {
		if replayed[i].Seq != live[i].Seq || replayed[i].ID != live[i].ID {
			t.Fatalf("replayed event %d is %s/%d, listener saw %s/%d", i,
				replayed[i].ID, replayed[i].Seq, live[i].ID, live[i].Seq)
		}
	}
}

// testAppendCancelled: Append records an event even when its context is
// already done (the hub passes a request's context, whose client may be
// gone), every time, and listeners get it.
func testAppendCancelled(t *testing.T, s store.Store) {
	got := make(chan string, 20)
	defer s.Listen(store.Listener{Event: func(e *store.Event) { got <- e.ID }})()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var want []string
	for i := range 20 { // a store that selects on ctx.Done() fails some
		id := fmt.Sprintf("cancelled-%d", i)
		if err := s.Append(ctx, NewEvent(id)); err != nil {
			t.Fatalf("Append %d with a cancelled context: %v", i, err)
		}
		want = append(want, id)
	}
	if _, ids := ReplayIDs(t, s, store.Earliest); !slices.Equal(ids, want) {
		t.Fatalf("replay %q, want %q", ids, want)
	}
	for _, id := range want {
		select {
		case g := <-got:
			if g != id {
				t.Fatalf("listener got %q, want %q", g, id)
			}
		case <-time.After(testwait.Deadline):
			t.Fatalf("listener never got %q", id)
		}
	}
}

// testSeam checks that listening first, replaying next and dropping the
// live events the replay covered yields every event after the cursor
// exactly once, while a publisher appends. 2 000 of them (200 with -short).
func testSeam(t *testing.T, s store.Store) {
	total, subscribers := 2000, 6
	if testing.Short() {
		total = 200
	}
	pub := func(i int) string { return fmt.Sprint("p", i) }
	var published atomic.Int64
	var wg sync.WaitGroup
	finished := make(chan struct{}) // the publisher returned
	wg.Go(func() {
		defer close(finished)
		for i := range total {
			if err := s.Append(context.Background(), NewEvent(pub(i))); err != nil {
				t.Errorf("Append: %v", err)
				return
			}
			published.Add(1)
		}
	})
	for sub := range subscribers {
		wg.Go(func() {
			// Start at staggered points of the publication, unless the
			// publisher failed.
			for published.Load() < int64(sub*total/subscribers) {
				if t.Failed() {
					return
				}
				time.Sleep(50 * time.Microsecond) // short: a subscriber starts at its point of the publication
			}
			var r recorder
			cancel := s.Listen(store.Listener{Event: r.fn})
			defer cancel()
			cursor, first := store.Earliest, 0
			if n := int(published.Load()); sub%2 == 1 && n > 0 {
				first = n / 2
				cursor = pub(first - 1)
			}
			b, err := s.Replay(context.Background(), cursor)
			if err != nil {
				t.Errorf("Replay: %v", err)
				return
			}
			var got []string
			last := b.Head
			for e, err := range b.Events {
				if err != nil {
					t.Errorf("Events: %v", err)
					return
				}
				got = append(got, e.ID)
				last = max(last, e.Seq)
			}
			<-finished // Append is bounded by the store; the test by -timeout
			if t.Failed() {
				return
			}
			// Wait for the live feed to catch up with the last event.
			if !testwait.Within(testwait.Deadline, func() bool {
				evs := r.events()
				return len(evs) > 0 && evs[len(evs)-1].ID == pub(total-1) || last >= uint64(total) && len(got) > 0 && got[len(got)-1] == pub(total-1)
			}) {
				t.Errorf("subscriber %d: live feed did not reach the last event", sub)
				return
			}
			for _, e := range r.events() {
				if e.Seq > last {
					got = append(got, e.ID)
				}
			}
			var want []string
			for i := first; i < total; i++ {
				want = append(want, pub(i))
			}
			if !slices.Equal(got, want) {
				t.Errorf("subscriber %d (cursor %s): got %d events, want %d; first difference at %d",
					sub, cursor, len(got), len(want), firstDiff(got, want))
			}
		})
	}
	wg.Wait()
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
