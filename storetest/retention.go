package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mercurekit/mercure/store"
)

// retentionKeep is the keep that RunRetention passes to open.
const retentionKeep = 1000

// RunRetention runs the cases about retention, which every store that
// drops old events should pass besides those of [Run]. open returns a
// fresh, empty store that keeps at least the keep most recent events and
// drops older ones, exactly or approximately: like Redis's MAXLEN ~, it
// may trim in batches and hold somewhat more than keep. The suite does
// not rely on how many more: it appends until a fresh replay shows that
// the events it needs gone are gone, and fails past 20×keep appends. It
// appends concurrently, which a store that commits concurrent appends
// together (as boltstore does) turns into few commits. keep is 1000, well
// above the 512 events that the stores of this module read at once, so
// that a replay of the retained history spans several reads and
// retention can drop events between two of them. The cases run in
// parallel, so each call of open must return a store of its own. When the
// store implements io.Closer, RunRetention closes it when the subtest ends.
//
// The cases:
//
//   - A replay that retention overtakes (it drops every event the replay
//     has still to yield), from [store.Earliest] and from a cursor,
//     with an event read before and with none, yields a contiguous run
//     of the events it would have yielded undisturbed, from the first.
//     If the run stops before Head, Events ends with an error wrapping
//     [store.ErrHistoryGap]: never silently short.
//   - Once events are dropped, a replay from Earliest yields exactly the
//     retained ones, contiguous and ending at Head, without error; a
//     cursor naming a dropped event is unknown (Cursor Earliest, every
//     retained event); one naming a retained event replays what follows.
//   - Listen delivers every event, in order, while retention drops them;
//     with a replay overtaken meanwhile, the replayed events and the live
//     ones after Head miss nothing unless the replay reports the gap
//     (the hub's seam between history and live events).
func RunRetention(t *testing.T, open func(t *testing.T, keep int) store.Store) {
	fresh := func(t *testing.T) *history {
		t.Helper()
		return &history{s: closing(t, open(t, retentionKeep)), keep: retentionKeep}
	}
	runParallel(t, "ReplayOvertakenEarliest", func(t *testing.T) { testOvertaken(t, fresh(t), false) })
	runParallel(t, "ReplayOvertakenCursor", func(t *testing.T) { testOvertaken(t, fresh(t), true) })
	runParallel(t, "ReplayAfterEviction", func(t *testing.T) { testAfterEviction(t, fresh(t)) })
	runParallel(t, "ListenWhileTrimming", func(t *testing.T) { testListenTrimming(t, fresh(t)) })
}

// appenders is how many goroutines append at once.
const appenders = 64

// history is a store under test and every event appended to it, in Seq
// order. Only the test appends.
type history struct {
	s    store.Store
	keep int
	evs  []*store.Event
	ids  int // events appended so far, which names the next one
}

// appendN appends n events with distinct ids, concurrently.
func (h *history) appendN(t *testing.T, n int) {
	t.Helper()
	var (
		mu    sync.Mutex
		added []*store.Event
		wg    sync.WaitGroup
		next  = make(chan string)
	)
	for range appenders {
		wg.Go(func() {
			for id := range next {
				e := NewEvent(id)
				if err := h.s.Append(context.Background(), e); err != nil {
					t.Errorf("Append(%q): %v", id, err)
					continue
				}
				mu.Lock()
				added = append(added, e)
				mu.Unlock()
			}
		})
	}
	for range n {
		next <- fmt.Sprint("r", h.ids)
		h.ids++
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	h.evs = append(h.evs, added...)
	slices.SortFunc(h.evs, func(a, b *store.Event) int { return cmp.Compare(a.Seq, b.Seq) })
}

// from returns the events appended from the one with Seq seq on.
func (h *history) from(t *testing.T, seq uint64) []*store.Event {
	t.Helper()
	i, ok := slices.BinarySearchFunc(h.evs, seq, func(e *store.Event, seq uint64) int { return cmp.Compare(e.Seq, seq) })
	if !ok {
		t.Fatalf("no event with Seq %d was appended", seq)
	}
	return h.evs[i:]
}

// firstRetained returns the oldest event that a fresh replay from
// Earliest yields.
func (h *history) firstRetained(t *testing.T) *store.Event {
	t.Helper()
	b, err := h.s.Replay(context.Background(), store.Earliest)
	if err != nil {
		t.Fatalf("Replay(earliest): %v", err)
	}
	for e, err := range b.Events {
		if err != nil {
			t.Fatalf("Events, no append under way: %v", err)
		}
		return e
	}
	t.Fatalf("the store retains no event of the %d appended (it should keep %d)", len(h.evs), h.keep)
	return nil
}

// dropThrough appends events until the store has dropped every one up to
// Seq seq, as a fresh replay shows. It calls settle, if not nil, after
// each batch of appends.
func (h *history) dropThrough(t *testing.T, seq uint64, settle func()) {
	t.Helper()
	batch := h.keep / 4
	for added := 0; ; added += batch {
		if h.firstRetained(t).Seq > seq {
			return
		}
		if added >= 20*h.keep {
			t.Fatalf("%d appends later, the store still retains Seq %d: does it keep %d events?", added, seq, h.keep)
		}
		h.appendN(t, batch)
		if settle != nil {
			settle()
		}
	}
}

// tail checks that evs are the latest events appended, in order, at
// least keep of them.
func (h *history) tail(t *testing.T, what string, evs []*store.Event) {
	t.Helper()
	if len(evs) < h.keep || len(evs) > len(h.evs) {
		t.Fatalf("%s: %d events, want at least the %d kept and at most the %d appended", what, len(evs), h.keep, len(h.evs))
	}
	sameRun(t, what, evs, h.evs[len(h.evs)-len(evs):])
}

// sameRun checks that got and want hold the same events.
func sameRun(t *testing.T, what string, got, want []*store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].ID != want[i].ID {
			t.Fatalf("%s: event %d is %s (Seq %d), want %s (Seq %d)", what, i, got[i].ID, got[i].Seq, want[i].ID, want[i].Seq)
		}
	}
}

// pulled is a backlog read an event at a time.
type pulled struct {
	b    store.Backlog
	next func() (*store.Event, error, bool)
	stop func()
	got  []*store.Event
	err  error // the error that ended Events
	done bool
}

func pull(t *testing.T, s store.Store, cursor string) *pulled {
	t.Helper()
	b, err := s.Replay(context.Background(), cursor)
	if err != nil {
		t.Fatalf("Replay(%q): %v", cursor, err)
	}
	next, stop := iter.Pull2(b.Events)
	t.Cleanup(stop)
	return &pulled{b: b, next: next, stop: stop}
}

// read reads n more events, or up to the end with n < 0.
func (p *pulled) read(n int) {
	for ; n != 0 && !p.done; n-- {
		e, err, ok := p.next()
		switch {
		case !ok:
			p.done = true
		case err != nil:
			p.err, p.done = err, true
		default:
			p.got = append(p.got, e)
		}
	}
	if p.done {
		p.stop()
	}
}

// overtaken checks a replay that retention overtook. want holds the
// events appended after its cursor, in order: undisturbed, the replay
// yields those up to its Head (a lazily iterating store may go on with
// later ones, see testHead). It must yield a prefix of want; if that
// stops before Head, the replay must end with an error wrapping
// ErrHistoryGap, and with no error otherwise.
func overtaken(t *testing.T, what string, p *pulled, want []*store.Event) {
	t.Helper()
	p.read(-1)
	if len(p.got) > len(want) {
		t.Fatalf("%s: %d events, more than the %d appended after its cursor", what, len(p.got), len(want))
	}
	sameRun(t, what+" (events skipped)", p.got, want[:len(p.got)])
	reached := len(p.got) > 0 && p.got[len(p.got)-1].Seq >= p.b.Head || len(want) == 0 || want[0].Seq > p.b.Head
	switch {
	case reached && p.err != nil:
		t.Fatalf("%s: Events ended with %v after it reached Head %d", what, p.err, p.b.Head)
	case !reached && p.err == nil:
		last := uint64(0)
		if len(p.got) > 0 {
			last = p.got[len(p.got)-1].Seq
		}
		t.Fatalf("%s: Events ended without error after %d events (last Seq %d), short of Head %d: a silent gap", what, len(p.got), last, p.b.Head)
	case !reached && !errors.Is(p.err, store.ErrHistoryGap):
		t.Fatalf("%s: Events ended short of Head with %v, want an error wrapping store.ErrHistoryGap", what, p.err)
	}
	t.Logf("%s: %d of the %d events up to Head, then %v", what, len(p.got), upTo(want, p.b.Head), p.err)
}

// upTo counts the events of evs up to Seq head.
func upTo(evs []*store.Event, head uint64) int {
	i, found := slices.BinarySearchFunc(evs, head, func(e *store.Event, head uint64) int { return cmp.Compare(e.Seq, head) })
	if found {
		i++
	}
	return i
}

// testOvertaken replays a history of keep events, from Earliest or from a
// cursor with three quarters of it to follow (more than one page of a
// paging store), and drops every one of them before the replay ends: one
// replay has yielded an event by then, another none, for a store may read
// its first page only when Events starts.
func testOvertaken(t *testing.T, h *history, fromCursor bool) {
	h.appendN(t, h.keep)
	_, retained := replay(t, h.s, store.Earliest)
	h.tail(t, "undisturbed replay", retained)
	cursor, want := store.Earliest, retained
	if fromCursor {
		i := len(retained) / 4
		cursor, want = retained[i].ID, retained[i+1:]
	}
	head := retained[len(retained)-1].Seq
	one, none := pull(t, h.s, cursor), pull(t, h.s, cursor)
	for _, p := range []*pulled{one, none} {
		if p.b.Cursor != cursor || p.b.Head != head {
			t.Fatalf("Replay(%q): Cursor %q Head %d, want %q and %d", cursor, p.b.Cursor, p.b.Head, cursor, head)
		}
	}
	one.read(1)
	if len(one.got) != 1 {
		t.Fatalf("Replay(%q) yielded no event (%v) before any was dropped", cursor, one.err)
	}
	h.dropThrough(t, head, nil)
	t.Run("OneRead", func(t *testing.T) {
		overtaken(t, "replay from "+cursor+", one event read when dropped", one, h.from(t, want[0].Seq))
	})
	t.Run("NoneRead", func(t *testing.T) {
		overtaken(t, "replay from "+cursor+", none read when dropped", none, h.from(t, want[0].Seq))
	})
}

// testAfterEviction checks replays of a history that retention has
// trimmed, with nothing appended under them: a store must report no gap
// where there is none, wherever its retained history starts.
func testAfterEviction(t *testing.T, h *history) {
	h.appendN(t, h.keep)
	gone := h.evs[h.keep/2]
	h.dropThrough(t, gone.Seq, nil)
	last := h.evs[len(h.evs)-1]

	b, retained := replay(t, h.s, store.Earliest)
	if b.Cursor != store.Earliest || b.Head != last.Seq {
		t.Fatalf("earliest: Cursor %q Head %d, want earliest and %d", b.Cursor, b.Head, last.Seq)
	}
	h.tail(t, "earliest", retained)

	b, got := replay(t, h.s, gone.ID)
	if b.Cursor != store.Earliest || b.Head != last.Seq {
		t.Fatalf("dropped cursor %s: Cursor %q Head %d, want earliest and %d", gone.ID, b.Cursor, b.Head, last.Seq)
	}
	sameRun(t, "dropped cursor "+gone.ID, got, retained)

	first := retained[0]
	b, got = replay(t, h.s, first.ID)
	if b.Cursor != first.ID || b.Head != last.Seq {
		t.Fatalf("cursor %s, the oldest retained: Cursor %q Head %d", first.ID, b.Cursor, b.Head)
	}
	sameRun(t, "cursor "+first.ID+", the oldest retained", got, retained[1:])

	b, got = replay(t, h.s, last.ID)
	if b.Cursor != last.ID || len(got) != 0 {
		t.Fatalf("cursor %s, the latest: Cursor %q, %d events", last.ID, b.Cursor, len(got))
	}
}

// testListenTrimming listens while retention overtakes a replay, as a
// hub does: the listener gets every event in order, and the replay
// reaches its Head or reports the gap, so that the events replayed and
// the live ones after Head hold every event from the first retained on,
// or the hub ends the stream and the client resumes. The listener is let
// catch up after each batch of appends: a feed that lags behind
// retention may skip events, as long as it calls Gap, which this case is
// not about.
func testListenTrimming(t *testing.T, h *history) {
	h.appendN(t, h.keep)
	_, retained := replay(t, h.s, store.Earliest)
	var r recorder
	var gaps atomic.Int64
	defer h.s.Listen(store.Listener{Event: r.fn, Gap: func() { gaps.Add(1) }})()
	before := len(h.evs)
	p := pull(t, h.s, store.Earliest)
	p.read(100)
	h.dropThrough(t, p.b.Head, func() { r.wait(t, len(h.evs)-before) })
	want := h.evs[before:]
	sameRun(t, "listener", r.wait(t, len(want)), want)
	if n := gaps.Load(); n != 0 {
		t.Fatalf("the feed reported %d gaps, though the listener kept up", n)
	}
	overtaken(t, "replay from earliest, 100 events read when dropped", p, h.from(t, retained[0].Seq))
}
