package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/storetest"
)

// feed records what a store's feed passes to a listener. It keeps the
// markers that settle appends apart from the events under test.
type feed struct {
	s      store.Store // the store listened to, to which settle appends
	mu     sync.Mutex
	evs    []*store.Event // the events passed, markers left out
	marks  map[string]int // marker id → how many events the feed had passed before it
	gaps   int
	status chan error
}

func listen(t testing.TB, s store.Store) *feed {
	f := &feed{s: s, marks: make(map[string]int), status: make(chan error, 100)}
	t.Cleanup(s.Listen(store.Listener{
		Event: func(e *store.Event) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if !isMarker(e.ID) {
				f.evs = append(f.evs, e)
			} else if _, ok := f.marks[e.ID]; !ok {
				f.marks[e.ID] = len(f.evs)
			}
		},
		Status: func(err error) { f.status <- err },
		Gap: func() {
			f.mu.Lock()
			f.gaps++
			f.mu.Unlock()
		},
	}))
	return f
}

func (f *feed) events() []*store.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.evs)
}

func (f *feed) gapCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gaps
}

// wait waits until the feed has passed n events and returns them.
func (f *feed) wait(t testing.TB, n int) []*store.Event {
	t.Helper()
	var evs []*store.Event
	if !storetest.Within(storetest.Deadline, func() bool { evs = f.events(); return len(evs) >= n }) {
		t.Fatalf("feed passed %d events (%q), want %d", len(evs), ids(evs), n)
	}
	return evs
}

// markerPrefix starts the ids of the events that settle appends.
const markerPrefix = "urn:settle-marker:"

var markerN atomic.Int64

func isMarker(id string) bool { return strings.HasPrefix(id, markerPrefix) }

// settle checks that the feed passes exactly n events, no more (a
// rolled-back update, say, is never delivered; nothing is delivered
// twice), and returns them. Rather than watch the feed for a while, it
// appends a marker through the feed's store and waits for it: the marker
// is numbered after every update committed before it (the append
// function stamps the committed rows still without a seq before its own
// batch), and a feed, of this store or of another on the same tables,
// passes events in seq order, each seq once, reading after the last it
// passed. So whatever of the updates under test the feed will ever pass
// has come before the marker, and those the marker finds missing, or
// extra, are so for good. Every caller has committed (or rolled back) the
// updates under test before it settles: a transaction still open is
// numbered after the marker, and is the next settle's. Markers are left
// out of the feed's events and of replayAll.
func (f *feed) settle(t testing.TB, n int) []*store.Event {
	t.Helper()
	id := fmt.Sprint(markerPrefix, markerN.Add(1))
	e := storetest.NewEvent(id)
	// Sent again, the same event is taken for a retry (a store just back
	// from an outage may fail the first append on a stale connection).
	storetest.WaitFor(t, "the marker to be appended", func() bool { return f.s.Append(context.Background(), e) == nil })
	var before int
	storetest.WaitFor(t, "the marker to be passed", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		var ok bool
		before, ok = f.marks[id]
		return ok
	})
	evs := f.events()[:before]
	if before != n {
		t.Fatalf("feed passed %q before the marker, want %d events", ids(evs), n)
	}
	return evs
}

func (f *feed) wantStatus(t testing.TB, down bool, within time.Duration) {
	t.Helper()
	select {
	case err := <-f.status:
		if (err != nil) != down {
			t.Fatalf("feed status %v, want down=%v", err, down)
		}
	case <-time.After(within):
		t.Fatalf("no feed status (want down=%v) within %v", down, within)
	}
}

func ids(evs []*store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// sameOrder checks that two sequences of events hold the same ids with
// the same Seqs, in order.
func sameOrder(t testing.TB, what string, got, want []*store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %q, want %q", what, ids(got), ids(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Seq != want[i].Seq {
			t.Fatalf("%s: event %d is %s/%d, want %s/%d", what, i, got[i].ID, got[i].Seq, want[i].ID, want[i].Seq)
		}
	}
}

// replayAll returns the events s replays after cursor, markers left out.
func replayAll(t testing.TB, s store.Store, cursor string) []*store.Event {
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
		if !isMarker(e.ID) {
			evs = append(evs, e)
		}
	}
	return evs
}

func upd(id string) mercure.Update {
	return mercure.Update{Topics: []string{"https://example.com/tx/" + id}, Data: "data " + id, ID: id}
}

// mustAppend appends an event with id, retrying as a publisher would: a
// store with a short timeout can run out of it on a healthy server beside
// CPU hogs, and a retry of the same event is recorded once.
func mustAppend(t testing.TB, s store.Store, id string) {
	t.Helper()
	storetest.MustAppend(t, s, storetest.NewEvent(id))
}

// TestTxHeldOpenAcrossCommits holds a transaction open, its update
// inserted (so holding an earlier insert id), while other updates commit
// and are delivered: once it commits, its update is delivered after them,
// live on two stores and on replay, in the same order with the same Seqs,
// and a reader that had already passed the others' positions gets it.
func TestTxHeldOpenAcrossCommits(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	a, b := open(t, pool, prefix), open(t, pool, prefix)
	fa, fb := listen(t, a), listen(t, b)
	ctx := context.Background()

	held, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if _, err := a.PublishTx(ctx, held, upd("held")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, "a1")
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishTx(ctx, other, upd("t2")); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, "a3")
	// Each feed's marker is numbered after a3 and before held, still
	// open: held, if passed early, would come before it.
	for _, f := range []*feed{fa, fb} {
		if got := ids(f.settle(t, 3)); strings.Join(got, " ") != "a1 t2 a3" {
			t.Fatalf("before the held transaction commits: %q", got)
		}
	}
	if got := ids(replayAll(t, a, store.Earliest)); strings.Join(got, " ") != "a1 t2 a3" {
		t.Fatalf("replay before the held transaction commits: %q", got)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, "a4")
	// Both stores number on the same tables: a marker appended through
	// either follows held and a4 in both feeds.
	live := fa.settle(t, 5)
	if got := ids(live); strings.Join(got, " ") != "a1 t2 a3 held a4" {
		t.Fatalf("live after the commit: %q", got)
	}
	sameOrder(t, "feed of the other store", fb.settle(t, 5), live)
	sameOrder(t, "replay from earliest", replayAll(t, b, store.Earliest), live)
	sameOrder(t, "replay from a3, passed before held committed", replayAll(t, a, "a3"), live[3:])
}

// TestTxRollback: an update published in a transaction that rolls back
// is never delivered nor replayed, and does not stall the others.
func TestTxRollback(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	s := open(t, pool, prefix)
	f := listen(t, s)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PublishTx(ctx, tx, upd("rolled-back")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "x")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "y")
	live := f.settle(t, 2)
	if got := ids(live); strings.Join(got, " ") != "x y" {
		t.Fatalf("live: %q", got)
	}
	if live[1].Seq != live[0].Seq+1 {
		t.Fatalf("Seqs %d then %d: the rolled-back update left a hole", live[0].Seq, live[1].Seq)
	}
	sameOrder(t, "replay", replayAll(t, s, store.Earliest), live)
}

// TestTxSQL publishes through database/sql on pgx's stdlib driver, with
// the application's own insert in the same transaction: both commit, or
// neither. The id is generated as the hub does.
func TestTxSQL(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	s := open(t, pool, prefix)
	f := listen(t, s)
	sdb := stdlib.OpenDBFromPool(pool)
	defer sdb.Close()
	ctx := context.Background()
	if _, err := sdb.ExecContext(ctx, `CREATE TABLE `+prefix+`_books (title text)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE `+prefix+`_books`) })
	var published []string
	for i, commit := range []bool{true, false, true} {
		tx, err := sdb.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+prefix+`_books VALUES ($1)`, fmt.Sprint("book ", i)); err != nil {
			t.Fatal(err)
		}
		id, err := s.PublishSQLTx(ctx, tx, mercure.Update{Topics: []string{"https://example.com/books"}, Data: fmt.Sprint("book ", i)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(id, "urn:uuid:") {
			t.Fatalf("generated id %q, want a urn:uuid:", id)
		}
		if commit {
			published = append(published, id)
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	live := f.settle(t, 2)
	if got := ids(live); !slices.Equal(got, published) {
		t.Fatalf("live %q, want %q", got, published)
	}
	if live[0].Data != "book 0" || live[1].Data != "book 2" {
		t.Fatalf("data %q, %q", live[0].Data, live[1].Data)
	}
	var books int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+prefix+`_books`).Scan(&books); err != nil || books != 2 {
		t.Fatalf("%d books (%v), want 2", books, err)
	}
}

// TestTxValidates: PublishTx refuses what the hub would, before writing.
func TestTxValidates(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	ctx := context.Background()
	s := open(t, pool, prefix)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := s.PublishTx(ctx, tx, mercure.Update{Data: "no topic"}); !errors.Is(err, mercure.ErrInvalidUpdate) {
		t.Fatalf("no topic: %v, want ErrInvalidUpdate", err)
	}
	if _, err := s.PublishTx(ctx, tx, mercure.Update{Topics: []string{"t"}, ID: store.Earliest}); !errors.Is(err, mercure.ErrInvalidUpdate) {
		t.Fatalf("id earliest: %v, want ErrInvalidUpdate", err)
	}
	own := open(t, pool, prefix, pgstore.WithValidator(func(mercure.Update) error { return errRefused }))
	if _, err := own.PublishTx(ctx, tx, upd("x")); !errors.Is(err, errRefused) {
		t.Fatalf("WithValidator: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := replayAll(t, s, store.Earliest); len(got) != 0 {
		t.Fatalf("refused updates recorded: %q", ids(got))
	}
}

var errRefused = errors.New("refused")

// TestTxInterleavings runs transactions that publish, some held open for
// random times across others' commits, some rolled back, with plain
// appends, on two stores: each store's feed passes exactly the committed
// updates, once, in the same order as each other and as a replay.
func TestTxInterleavings(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	a, b := open(t, pool, prefix), open(t, pool, prefix)
	fa, fb := listen(t, a), listen(t, b)
	ctx := context.Background()
	const workers, per = 8, 25
	var mu sync.Mutex
	committed := map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		s := []*pgstore.Store{a, b}[w%2]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 15))
			for i := range per {
				id := fmt.Sprintf("w%d-%d", w, i)
				if r.IntN(4) == 0 {
					if err := s.Append(ctx, storetest.NewEvent(id)); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					committed[id] = true
					mu.Unlock()
					continue
				}
				commit := r.IntN(5) != 0
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if _, err := s.PublishTx(ctx, tx, upd(id)); err != nil {
						return err
					}
					time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
					if !commit {
						return errRefused
					}
					return nil
				})
				if err != nil && !errors.Is(err, errRefused) {
					t.Error(err)
					return
				}
				if commit {
					mu.Lock()
					committed[id] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	n := len(committed)
	// Every transaction has ended: a marker appended through either store
	// is numbered after every committed update, in both feeds.
	live := fa.settle(t, n)
	sameOrder(t, "feed of store B", fb.settle(t, n), live)
	sameOrder(t, "replay", replayAll(t, a, store.Earliest), live)
	for i, e := range live {
		if !committed[e.ID] {
			t.Fatalf("delivered %s, which was rolled back", e.ID)
		}
		if i > 0 && e.Seq != live[i-1].Seq+1 {
			t.Fatalf("Seq %d after %d", e.Seq, live[i-1].Seq)
		}
	}
	if ga, gb := fa.gapCount(), fb.gapCount(); ga != 0 || gb != 0 {
		t.Fatalf("gaps reported: %d, %d", ga, gb)
	}
}
