package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/pgstore/pgtest"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

// The failover tests stage a primary and a standby of their own (see
// package pgtest), stores on the DSN of both (target_session_attrs=
// read-write), the primary killed and the standby promoted.

// failoverOpts are the options of the failover tests' stores: a short
// timeout and poll, so that the stores notice the primary gone soon.
var failoverOpts = []pgstore.Option{pgstore.WithTimeout(time.Second), pgstore.WithPollInterval(100 * time.Millisecond)}

// journal records, in order, what a store's feed passes to a listener:
// "id/seq" for an event, "GAP", and "REWOUND head/id".
type journal struct {
	mu  sync.Mutex
	log []string
}

func record(t testing.TB, s store.Store) *journal {
	j := &journal{}
	t.Cleanup(s.Listen(store.Listener{
		Event:   func(e *store.Event) { j.add(fmt.Sprintf("%s/%d", e.ID, e.Seq)) },
		Gap:     func() { j.add("GAP") },
		Rewound: func(head uint64, id string) { j.add(fmt.Sprintf("REWOUND %d/%s", head, id)) },
	}))
	return j
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.log = append(j.log, s)
	j.mu.Unlock()
}

func (j *journal) entries() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.log)
}

// waitFor waits until the journal holds an entry that starts with
// prefix, and returns the entries up to it.
func (j *journal) waitFor(t testing.TB, prefix string) []string {
	t.Helper()
	var log []string
	if !storetest.Within(storetest.Deadline, func() bool {
		log = j.entries()
		return slices.ContainsFunc(log, func(s string) bool { return strings.HasPrefix(s, prefix) })
	}) {
		t.Fatalf("the feed passed %q, and no %q", log, prefix)
	}
	i := slices.IndexFunc(log, func(s string) bool { return strings.HasPrefix(s, prefix) })
	return log[:i+1]
}

// settle appends a marker to s and checks that the journal holds want,
// then the marker.
func (j *journal) settle(t testing.TB, s store.Store, want ...string) {
	t.Helper()
	e := storetest.NewEvent(fmt.Sprint(markerPrefix, markerN.Add(1)))
	storetest.MustAppend(t, s, e)
	got := j.waitFor(t, e.ID+"/")
	if want = append(want, fmt.Sprintf("%s/%d", e.ID, e.Seq)); !slices.Equal(got, want) {
		t.Fatalf("the feed passed %q, want %q", got, want)
	}
}

// promote promotes sb, logs how long it took, and returns when it
// accepted writes.
func promote(t testing.TB, sb *pgtest.Server) time.Time {
	t.Helper()
	start := time.Now()
	sb.Promote()
	now := time.Now()
	t.Logf("promoted in %v", now.Sub(start).Round(time.Millisecond))
	return now
}

// rows counts the events that srv holds, -1 if it cannot tell.
func rows(srv *pgtest.Server) int {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		return -1
	}
	defer c.Close(ctx)
	var n int
	if c.QueryRow(ctx, `SELECT count(*) FROM mercure_events`).Scan(&n) != nil {
		return -1
	}
	return n
}

// replayFrom replays s from cursor, retrying as a subscriber would
// reconnect, and returns the backlog's cursor and its events as "id/seq".
func replayFrom(t testing.TB, s store.Store, cursor string) (string, []string) {
	t.Helper()
	var got []string
	var b store.Backlog
	var err error
	try := func() bool {
		got = nil
		if b, err = s.Replay(context.Background(), cursor); err != nil {
			return false
		}
		for e, err2 := range b.Events {
			if err = err2; err != nil {
				return false
			}
			if !isMarker(e.ID) {
				got = append(got, fmt.Sprintf("%s/%d", e.ID, e.Seq))
			}
		}
		return true
	}
	if !storetest.Within(storetest.Deadline, try) {
		t.Fatalf("Replay(%q): %v", cursor, err)
	}
	return b.Cursor, got
}

// TestFailoverLosingEvents: the standby promoted lacks the last events
// the feed passed on (it was down while the primary recorded them). The
// listener is told where the new primary's history ends, before any
// event of it; the events appended next take Seqs the feed passed
// before, and every one reaches the listener, none skipped; LatestID
// follows, and a cursor on a lost event is unknown.
func TestFailoverLosingEvents(t *testing.T) {
	t.Parallel()
	p := pgtest.Start(t)
	sb := p.StartStandby(t, false)
	s := open(t, newPool(t, pgtest.MultiHostDSN(p, sb)), "mercure", failoverOpts...)
	j := record(t, s)
	for _, id := range []string{"a1", "a2"} {
		mustAppend(t, s, id)
	}
	storetest.WaitFor(t, "the standby to hold a1 and a2", func() bool { return rows(sb) == 2 })
	sb.Stop()
	for _, id := range []string{"b1", "b2", "b3"} {
		mustAppend(t, s, id)
	}
	before := []string{"a1/1", "a2/2", "b1/3", "b2/4", "b3/5"}
	if got := j.waitFor(t, "b3/"); !slices.Equal(got, before) {
		t.Fatalf("before the failover, the feed passed %q, want %q", got, before)
	}
	p.Kill()
	sb.Start()
	promoted := promote(t, sb)

	// c0 goes as soon as the new primary takes it: before the feed is
	// back, and it is then the head that the rewind names, or after.
	c0 := storetest.NewEvent("c0")
	storetest.MustAppend(t, s, c0)
	t.Logf("first append acknowledged %v after the promote", time.Since(promoted).Round(time.Millisecond))
	if c0.Seq != 3 {
		t.Fatalf("c0 has Seq %d, want 3, after a2's", c0.Seq)
	}
	got := j.waitFor(t, "REWOUND")
	want := append(slices.Clone(before), "REWOUND 2/a2")
	if got[len(got)-1] == "REWOUND 3/c0" {
		want[len(want)-1] = "REWOUND 3/c0"
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the feed passed %q, want %q", got, want)
	}
	t.Logf("%s %v after the promote", got[len(got)-1], time.Since(promoted).Round(time.Millisecond))
	// b3, at Seq 5, is gone: c0 at Seq 3 is the latest.
	storetest.WaitFor(t, "LatestID to be c0", func() bool { return s.LatestID() == "c0" })
	for _, id := range []string{"c1", "c2", "c3"} {
		mustAppend(t, s, id)
	}
	if got[len(got)-1] == "REWOUND 2/a2" {
		want = append(want, "c0/3")
	}
	want = append(want, "c1/4", "c2/5", "c3/6")
	j.settle(t, s, want...)
	mustAppend(t, s, "c4")
	storetest.WaitFor(t, "LatestID to be c4", func() bool { return s.LatestID() == "c4" })

	for _, lost := range []string{"b1", "b3"} {
		cursor, evs := replayFrom(t, s, lost)
		if cursor != store.Earliest || !slices.Equal(evs, []string{"a1/1", "a2/2", "c0/3", "c1/4", "c2/5", "c3/6", "c4/8"}) {
			t.Fatalf("Replay(%q): cursor %q, events %q; want every event from earliest", lost, cursor, evs)
		}
	}
	// b2's publisher sends it again: it is recorded after c4. A client
	// that got b2 before the failover must not resume after the retry,
	// past c0 to c4: b2 is an unknown cursor.
	storetest.MustAppend(t, s, storetest.NewEvent("b2"))
	if cursor, _ := replayFrom(t, s, "b2"); cursor != store.Earliest {
		t.Fatalf("Replay(b2), b2 vanished and recorded again: cursor %q, want %q", cursor, store.Earliest)
	}
}

// TestFailoverSynchronous: with a synchronous standby and
// WithSynchronousReplication, the primary is killed while a publisher
// appends, each update sent again until acknowledged: once the standby
// is promoted, every acknowledged update is in the history exactly once,
// the listener got each event once, in order, with no gap and no
// rewind, and appends go on.
func TestFailoverSynchronous(t *testing.T) {
	t.Parallel()
	p := pgtest.Start(t)
	sb := p.StartStandby(t, true)
	opts := append([]pgstore.Option{pgstore.WithSynchronousReplication()}, failoverOpts...)
	s := open(t, newPool(t, pgtest.MultiHostDSN(p, sb)), "mercure", opts...)
	j := record(t, s)

	type ack struct {
		id string
		at time.Time
	}
	var mu sync.Mutex
	var acks []ack
	acked := func() []ack {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(acks)
	}
	stop := make(chan struct{})
	failed := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			e := storetest.NewEvent(fmt.Sprint("e", i))
			var err error
			stopped := false
			if !storetest.Within(storetest.Deadline, func() bool {
				select {
				case <-stop:
					stopped = true
					return true
				default:
				}
				err = s.Append(context.Background(), e)
				return err == nil
			}) {
				failed <- fmt.Errorf("Append(%s): %w", e.ID, err)
				return
			}
			if stopped {
				return
			}
			mu.Lock()
			acks = append(acks, ack{e.ID, time.Now()})
			mu.Unlock()
		}
	})
	storetest.WaitFor(t, "20 appends", func() bool { return len(acked()) >= 20 })
	p.Kill()
	n := len(acked())
	promoted := promote(t, sb)
	storetest.WaitFor(t, "20 appends after the failover", func() bool { return len(acked()) >= n+20 })
	close(stop)
	wg.Wait()
	select {
	case err := <-failed:
		t.Fatal(err)
	default:
	}
	all := acked()
	for _, a := range all {
		if a.at.After(promoted) {
			t.Logf("first append acknowledged %v after the promote (%d before the kill or in flight)",
				a.at.Sub(promoted).Round(time.Millisecond), n)
			break
		}
	}

	_, replayed := replayFrom(t, s, store.Earliest)
	seen := make(map[string]int)
	for _, e := range replayed {
		id, _, _ := strings.Cut(e, "/")
		seen[id]++
	}
	for _, a := range all {
		if seen[a.id] != 1 {
			t.Errorf("acknowledged %s is %d times in the history", a.id, seen[a.id])
		}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s is %d times in the history", id, c)
		}
	}
	// What the feed passed is the history, in order: no gap, no rewind.
	j.settle(t, s, replayed...)
}

// TestFailoverTwoHubs: two stores with pools of their own follow the
// promotion on their own: each appends again, and each feed passes both
// stores' events.
func TestFailoverTwoHubs(t *testing.T) {
	t.Parallel()
	p := pgtest.Start(t)
	sb := p.StartStandby(t, false)
	dsn := pgtest.MultiHostDSN(p, sb)
	a, b := open(t, newPool(t, dsn), "mercure", failoverOpts...), open(t, newPool(t, dsn), "mercure", failoverOpts...)
	ja, jb := record(t, a), record(t, b)
	mustAppend(t, a, "from-a")
	mustAppend(t, b, "from-b")
	storetest.WaitFor(t, "the standby to hold both events", func() bool { return rows(sb) == 2 })
	p.Kill()
	promoted := promote(t, sb)
	ea, eb := storetest.NewEvent("a-after"), storetest.NewEvent("b-after")
	storetest.MustAppend(t, a, ea)
	t.Logf("A appended %v after the promote", time.Since(promoted).Round(time.Millisecond))
	storetest.MustAppend(t, b, eb)
	t.Logf("B appended %v after the promote", time.Since(promoted).Round(time.Millisecond))
	want := []string{"from-a/1", "from-b/2", fmt.Sprintf("a-after/%d", ea.Seq), fmt.Sprintf("b-after/%d", eb.Seq)}
	if ea.Seq > eb.Seq {
		want[2], want[3] = want[3], want[2]
	}
	ja.settle(t, a, want...)
	markerA := ja.entries()[4]
	jb.settle(t, b, append(slices.Clone(want), markerA)...)
}

// TestSynchronousReplicationOption: the option is refused by a server
// without synchronous standbys; given one, the store's appends wait for
// it even when the role's default is synchronous_commit=off, which lets
// a store without the option be acknowledged while the standby is down;
// without the option, a store leaves the default as it is. An append that
// timed out waiting is committed all the same, and delivered; sent again
// once the standby is back, it is taken for a retry.
func TestSynchronousReplicationOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		pool, prefix := db(t)
		var names string
		if err := pool.QueryRow(ctx, `SHOW synchronous_standby_names`).Scan(&names); err != nil || names != "" {
			t.Skipf("the shared server names synchronous standbys (%q, %v)", names, err)
		}
		_, err := pgstore.New(ctx, pool, pgstore.WithPrefix(prefix), pgstore.WithSynchronousReplication())
		if !errors.Is(err, pgstore.ErrNoSynchronousStandby) {
			t.Fatalf("New: %v, want ErrNoSynchronousStandby", err)
		}
	})
	t.Run("waits", func(t *testing.T) {
		t.Parallel()
		p := pgtest.Start(t)
		sb := p.StartStandby(t, true)
		c, err := pgx.Connect(ctx, p.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		// postgres's sessions default to off; app's to on, the
		// server's default.
		for _, q := range []string{`ALTER ROLE postgres SET synchronous_commit = off`, `CREATE ROLE app LOGIN SUPERUSER`} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		pool := func(user string) *pgxpool.Pool {
			return newPool(t, strings.Replace(p.DSN, "postgres@", user+"@", 1))
		}
		off := pool("postgres")
		var level string
		if err := off.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&level); err != nil || level != "off" {
			t.Fatalf("the role's default synchronous_commit: %q (%v), want off", level, err)
		}
		// Appends that must time out have a short timeout; durable's
		// feed, the long one of open, waits for the standby's return.
		short := pgstore.WithTimeout(time.Second)
		durably := pgstore.WithSynchronousReplication()
		plain := open(t, off, "plain", short)
		quick := open(t, off, "durable", short, durably)
		durable := open(t, off, "durable", durably)
		inherit := open(t, pool("app"), "inherit", short)
		jd := record(t, durable)
		sb.Kill()

		if err := plain.Append(ctx, storetest.NewEvent("p1")); err != nil {
			t.Fatalf("without the option, with synchronous_commit=off, an append failed: %v", err)
		}
		d1 := storetest.NewEvent("d1")
		if err := quick.Append(ctx, d1); err == nil {
			t.Error("with the option, an append was acknowledged while the synchronous standby was down")
		}
		if err := inherit.Append(ctx, storetest.NewEvent("i1")); err == nil {
			t.Error("without the option, the default on, an append was acknowledged while the synchronous standby was down")
		}
		// The wait was cancelled, not the commit: d1 is recorded, and
		// delivered, though the standby lacks it.
		jd.waitFor(t, "d1/1")
		quick.Close() // durable's feed alone numbers what follows
		// The application's transaction commits with its own setting,
		// off; the feed's round that numbers its update waits.
		if err := pgx.BeginFunc(ctx, off, func(tx pgx.Tx) error { return publishTx(durable, tx, upd("t1")) }); err != nil {
			t.Fatal(err)
		}
		storetest.WaitFor(t, "the feed's round to wait for the standby", func() bool {
			var n int
			return c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE wait_event = 'SyncRep' AND query LIKE '%durable_sequence%'`).Scan(&n) == nil && n > 0
		})
		sb.Start()
		// Sent again, d1 is taken for a retry, acknowledged once the
		// standby has it.
		storetest.MustAppend(t, durable, d1)
		mustAppend(t, durable, "d2")
		if got, want := jd.waitFor(t, "d2/"), []string{"d1/1", "t1/2", "d2/3"}; !slices.Equal(got, want) {
			t.Fatalf("the feed passed %q, want %q", got, want)
		}
	})
}

// TestFailoverSubscriptions: the standby promoted lacks a subscription
// that a store shared while it was down; the store shares it again once
// its feed is back, though its row in the hubs table survived.
func TestFailoverSubscriptions(t *testing.T) {
	t.Parallel()
	p := pgtest.Start(t)
	sb := p.StartStandby(t, false)
	dsn := pgtest.MultiHostDSN(p, sb)
	a := open(t, newPool(t, dsn), "mercure", failoverOpts...)
	ctx := context.Background()
	sub := func(id string) []store.Subscription {
		return []store.Subscription{{ID: id, Active: true, JSON: []byte(`{"id":"` + id + `"}`)}}
	}
	if err := a.UpdateSubscriptions(ctx, sub("x")); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, "the standby to hold x", func() bool {
		c, err := pgx.Connect(ctx, sb.DSN)
		if err != nil {
			return false
		}
		defer c.Close(ctx)
		var n int
		return c.QueryRow(ctx, `SELECT count(*) FROM mercure_subs`).Scan(&n) == nil && n == 1
	})
	sb.Stop()
	if err := a.UpdateSubscriptions(ctx, sub("y")); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	sb.Start()
	sb.Promote()
	b := open(t, newPool(t, dsn), "mercure", failoverOpts...)
	var ids []string
	var err error
	if !storetest.Within(storetest.Deadline, func() bool {
		ids, err = storetest.SubscriptionIDs(ctx, b)
		return err == nil && slices.Equal(ids, []string{"x", "y"})
	}) {
		t.Fatalf("another store lists %q (%v), want x and y", ids, err)
	}
}

// restore rewinds the history of prefix in place to its first event,
// as a database restored from a backup would be.
func restore(t testing.TB, pool *pgxpool.Pool, prefix string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`DELETE FROM `+prefix+`_events WHERE seq > 1; UPDATE `+prefix+`_meta SET last_seq = 1`); err != nil {
		t.Fatal(err)
	}
}

// TestRewoundUnderTheFeed: the history goes back while a feed stays
// connected (a database restored in place). The next notification of
// the sequencer announces a counter below the one before: the feed
// checks the history, and reports the rewind before the events that
// follow, which take Seqs it passed before.
func TestRewoundUnderTheFeed(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	a, b := open(t, pool, prefix), open(t, pool, prefix)
	j := record(t, a)
	// The feed compares a notification with the one before on its
	// connection: a2 and a3 go once it has read a1, so once it listens.
	mustAppend(t, a, "a1")
	j.waitFor(t, "a1/")
	for _, id := range []string{"a2", "a3"} {
		mustAppend(t, a, id)
	}
	j.waitFor(t, "a3/")
	restore(t, pool, prefix)
	mustAppend(t, b, "x")
	got := j.waitFor(t, "REWOUND")
	if want := []string{"a1/1", "a2/2", "a3/3", "REWOUND 2/x"}; !slices.Equal(got, want) {
		t.Fatalf("the feed passed %q, want %q", got, want)
	}
	mustAppend(t, b, "y")
	j.settle(t, a, "a1/1", "a2/2", "a3/3", "REWOUND 2/x", "y/3")
}

// viaProxy returns a proxy to pool's server, which a test cuts and
// mends, and a pool that reaches the server through it.
func viaProxy(t *testing.T, pool *pgxpool.Pool) (*storetest.Proxy, *pgxpool.Pool) {
	t.Helper()
	c := pool.Config().ConnConfig
	proxy := storetest.StartProxy(t, fmt.Sprintf("%s:%d", c.Host, c.Port), nil)
	return proxy, newPool(t, fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", c.User, proxy.Addr(), c.Database))
}

// TestRewoundWhileCutOff: the history goes back and moves on past the
// last event a feed passed while the feed was cut off. Connected again,
// the feed finds that event's Seq holding another one, reports the
// rewind, and passes what follows.
func TestRewoundWhileCutOff(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	proxy, through := viaProxy(t, pool)
	a, b := open(t, through, prefix, failoverOpts...), open(t, pool, prefix)
	j := record(t, a)
	for _, id := range []string{"a1", "a2", "a3"} {
		mustAppend(t, a, id)
	}
	j.waitFor(t, "a3/")
	proxy.Cut()
	restore(t, pool, prefix)
	for _, id := range []string{"x", "y", "z"} {
		mustAppend(t, b, id)
	}
	proxy.Mend(t)
	got := j.waitFor(t, "REWOUND")
	if want := []string{"a1/1", "a2/2", "a3/3", "REWOUND 4/z"}; !slices.Equal(got, want) {
		t.Fatalf("the feed passed %q, want %q", got, want)
	}
	mustAppend(t, b, "w")
	j.settle(t, a, "a1/1", "a2/2", "a3/3", "REWOUND 4/z", "w/5")
}

// TestResyncTakesRoundedTimes: an event whose time a driver sent as text
// (PublishSQLTx with a driver other than pgx), which PostgreSQL rounds to
// the microsecond where pgx truncates, is still the event the feed passed
// on when it connects again: no rewind.
func TestResyncTakesRoundedTimes(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	proxy, through := viaProxy(t, pool)
	s := open(t, through, prefix, failoverOpts...)
	j := record(t, s)
	at := time.Now().Truncate(time.Microsecond).Add(999 * time.Nanosecond) // rounds up
	body := fmt.Sprintf(`{"t":["x"],"i":"r","ts":%d}`, at.UnixNano())
	if _, err := pool.Exec(context.Background(), `INSERT INTO `+prefix+`_events (update_id, body, at) VALUES ('r', $1::json, $2::text::timestamptz)`,
		body, at.Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	j.waitFor(t, "r/1")
	proxy.Cut()
	proxy.Mend(t)
	j.settle(t, s, "r/1")
}

// openStream subscribes to topic on in, resuming after lastEventID when
// it is not empty; the stream is closed when t ends.
func openStream(t *testing.T, in *instance, lastEventID string) *storetest.Stream {
	t.Helper()
	return storetest.Subscribe(t, in.srv, "/.well-known/mercure", "match="+url.QueryEscape(topic), lastEventID)
}

// TestFailoverHub: a hub on the store, a subscriber connected through a
// failover that loses events. The hub ends the stream (the store reported
// the rewind); the subscriber, resuming after a lost event, gets the new
// primary's history from the start, then what is published next.
func TestFailoverHub(t *testing.T) {
	t.Parallel()
	p := pgtest.Start(t)
	sb := p.StartStandby(t, false)
	in := newInstance(t, pgtest.MultiHostDSN(p, sb), "mercure", failoverOpts...)
	ctx := context.Background()
	publish := func(id string) {
		t.Helper()
		storetest.WaitFor(t, "the hub to publish "+id, func() bool {
			_, err := in.hub.Publish(ctx, mercure.Update{ID: id, Topics: []string{topic}, Data: id})
			return err == nil
		})
	}
	s1 := openStream(t, in, "")
	publish("a1")
	publish("a2")
	// The hub records subscription events too: the standby holds
	// what the primary does.
	storetest.WaitFor(t, "the standby to hold a1 and a2", func() bool { n := rows(p); return n > 0 && rows(sb) == n })
	sb.Stop()
	publish("b1")
	publish("b2")
	var got []string
	storetest.WaitFor(t, "the stream to get a1 to b2", func() bool { got = append(got, s1.Read()...); return len(got) >= 4 })
	if want := []string{"a1", "a2", "b1", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("the stream got %q, want %q", got, want)
	}
	p.Kill()
	sb.Start()
	promote(t, sb)
	select {
	case <-s1.Ended():
	case <-time.After(storetest.Deadline):
		t.Fatal("the stream did not end after the rewind")
	}
	if extra := s1.Read(); len(extra) > 0 {
		t.Fatalf("the stream got %q after b2", extra)
	}
	s2 := openStream(t, in, "b2")
	publish("c1")
	got = nil
	storetest.WaitFor(t, "the resumed stream to get c1", func() bool { got = append(got, s2.Read()...); return slices.Contains(got, "c1") })
	if want := []string{"a1", "a2", "c1"}; !slices.Equal(got, want) {
		t.Fatalf("the resumed stream got %q, want %q", got, want)
	}
}

// TestFailoverSuite runs storetest.RunFailover on a primary and a
// streaming standby, on pgx's multi-host URL: the standby stops (it
// lags) a sixth of the way through, the primary is killed, the standby
// started again and promoted, as an operator's tooling would. Without
// synchronous replication the events the standby lacked are lost, and
// every stream that got one is told; with it, appends wait for the
// standby, fail while it is down, and nothing acknowledged is lost.
func TestFailoverSuite(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "Async", true: "Synchronous"}[durable], func(t *testing.T) {
			t.Parallel()
			p := pgtest.Start(t)
			sb := p.StartStandby(t, durable)
			opts := slices.Clone(failoverOpts)
			if durable {
				opts = append(opts, pgstore.WithSynchronousReplication())
			}
			dsn := pgtest.MultiHostDSN(p, sb)
			storetest.RunFailover(t, &storetest.Failover{
				Open: func(t *testing.T) store.Store {
					return open(t, newPool(t, dsn), "mercure", opts...)
				},
				Lag: func(t *testing.T) { sb.Stop() },
				KillPrimary: func(t *testing.T) {
					p.Kill()
					sb.Start()
					promote(t, sb)
				},
				Durable: durable,
			})
		})
	}
}
