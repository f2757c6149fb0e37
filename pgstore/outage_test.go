package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/netproxy"
	"github.com/mercurekit/mercure/internal/pgtest"
	"github.com/mercurekit/mercure/internal/ssetest"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/storetest"
)

// TestOutage kills PostgreSQL under a store: Append fails within the
// timeout instead of hanging, the feed reports the outage and its end,
// history committed before the crash survives, and the feed resumes with
// what is appended after the restart.
func TestOutage(t *testing.T) {
	srv := pgtest.Start(t)
	pool := newPool(t, srv.DSN)
	s := open(t, pool, "mercure", pgstore.WithTimeout(time.Second), pgstore.WithPollInterval(100*time.Millisecond))
	f := listen(t, s)
	mustAppend(t, s, "before")
	f.wait(t, 1)

	srv.Kill()
	f.wantStatus(t, true, 5*time.Second)
	start := time.Now()
	if err := s.Append(context.Background(), storetest.NewEvent("during")); err == nil {
		t.Fatal("Append succeeded while PostgreSQL is down")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Append took %v to fail with a 1s timeout", d)
	}
	if _, err := s.Replay(context.Background(), mercure.Earliest); err == nil {
		t.Fatal("Replay succeeded while PostgreSQL is down")
	}

	srv.Start()
	f.wantStatus(t, false, 15*time.Second)
	waitFor(t, "an append to succeed", func() bool {
		return s.Append(context.Background(), storetest.NewEvent("after")) == nil
	})
	if got := ids(f.settle(t, 2)); strings.Join(got, " ") != "before after" {
		t.Fatalf("feed: %q", got)
	}
	if got := ids(replayAll(t, s, mercure.Earliest)); strings.Join(got, " ") != "before after" {
		t.Fatalf("history after the restart: %q", got)
	}
}

// TestListenDuringOutage checks that a listener added while the feed is
// down is told at once.
func TestListenDuringOutage(t *testing.T) {
	srv := pgtest.Start(t)
	s := open(t, newPool(t, srv.DSN), "mercure", pgstore.WithTimeout(time.Second))
	first := listen(t, s)
	srv.Kill()
	first.wantStatus(t, true, 5*time.Second)
	listen(t, s).wantStatus(t, true, time.Second)
}

// TestConnectionsCut cuts every connection of one store (a network
// partition) while another store keeps appending: the cut store's feed
// reports the outage, its Append fails fast, and once the network is
// back its feed resumes after the last event it delivered: every event,
// once, in order.
func TestConnectionsCut(t *testing.T) {
	pool, prefix := db(t)
	cfg := pool.Config()
	p := netproxy.Start(t, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port), nil)
	host, port, _ := strings.Cut(p.Addr(), ":")
	dsn := fmt.Sprintf("postgres://%s@%s:%s/%s?sslmode=disable", cfg.ConnConfig.User, host, port, cfg.ConnConfig.Database)
	cut := open(t, newPool(t, dsn), prefix, pgstore.WithTimeout(time.Second), pgstore.WithPollInterval(100*time.Millisecond))
	direct := open(t, pool, prefix)
	f := listen(t, cut)
	mustAppend(t, direct, "e0")
	mustAppend(t, cut, "e1")
	f.wait(t, 2)

	p.Cut()
	f.wantStatus(t, true, 5*time.Second)
	start := time.Now()
	if err := cut.Append(context.Background(), storetest.NewEvent("lost")); err == nil {
		t.Fatal("Append succeeded through a cut network")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Append took %v to fail with a 1s timeout", d)
	}
	for i := range 600 { // more than a page of the feed
		mustAppend(t, direct, fmt.Sprint("d", i))
	}
	p.Mend(t)
	f.wantStatus(t, false, 15*time.Second)
	mustAppend(t, cut, "e2")
	live := f.settle(t, 603)
	sameOrder(t, "feed after the cut", live, replayAll(t, direct, mercure.Earliest))
	if n := f.gapCount(); n != 0 {
		t.Fatalf("%d gaps reported, nothing was deleted", n)
	}
}

// TestGapAfterRetentionDuringOutage: events deleted by retention while a
// store's feed was cut off are reported as a gap, before the next event.
func TestGapAfterRetentionDuringOutage(t *testing.T) {
	pool, prefix := db(t)
	cfg := pool.Config()
	p := netproxy.Start(t, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port), nil)
	host, port, _ := strings.Cut(p.Addr(), ":")
	dsn := fmt.Sprintf("postgres://%s@%s:%s/%s?sslmode=disable", cfg.ConnConfig.User, host, port, cfg.ConnConfig.Database)
	cut := open(t, newPool(t, dsn), prefix, pgstore.WithTimeout(time.Second), pgstore.WithMaxEvents(10))
	direct := open(t, pool, prefix, pgstore.WithMaxEvents(10))
	f := listen(t, cut)
	mustAppend(t, direct, "first")
	f.wait(t, 1)
	p.Cut()
	f.wantStatus(t, true, 5*time.Second)
	for i := range 50 {
		mustAppend(t, direct, fmt.Sprint("d", i))
	}
	p.Mend(t)
	f.wantStatus(t, false, 15*time.Second)
	waitFor(t, "the gap", func() bool { return f.gapCount() == 1 })
	evs := f.wait(t, 2)
	if evs[1].ID == "d0" {
		t.Fatal("the feed passed d0, which retention deleted")
	}
}

// TestCrashBeforeSequencing: a transaction's row committed without a
// seq (its PublishTx notification lost, or its hub killed before a
// round) delays the update until a store's poll, never loses it.
func TestCrashBeforeSequencing(t *testing.T) {
	pool, prefix := db(t)
	s := open(t, pool, prefix, pgstore.WithPollInterval(50*time.Millisecond))
	f := listen(t, s)
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO `+prefix+`_events (update_id, body, at) VALUES ('orphan', '{"t":["x"],"i":"orphan"}', now())`); err != nil {
		t.Fatal(err)
	}
	if got := f.wait(t, 1); got[0].ID != "orphan" || got[0].Seq != 1 {
		t.Fatalf("feed passed %s/%d", got[0].ID, got[0].Seq)
	}
}

// An append batch first numbers the committed rows still without a seq
// (here a transaction's, whose notification was lost), then its own
// after them: committed earlier, delivered earlier.
func TestAppendNumbersOrphansFirst(t *testing.T) {
	pool, prefix := db(t)
	s := open(t, pool, prefix, pgstore.WithPollInterval(time.Hour))
	f := listen(t, s)
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO `+prefix+`_events (update_id, body, at) VALUES ('orphan', '{"t":["x"],"i":"orphan"}', now())`); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(context.Background(), storetest.NewEvent("mine")); err != nil {
		t.Fatal(err)
	}
	got := f.wait(t, 2)
	if got[0].ID != "orphan" || got[0].Seq != 1 || got[1].ID != "mine" || got[1].Seq != 2 {
		t.Fatalf("feed: %s/%d, %s/%d; want orphan/1, mine/2", got[0].ID, got[0].Seq, got[1].ID, got[1].Seq)
	}
	if _, ids := storetest.ReplayIDs(t, s, mercure.Earliest); len(ids) != 2 || ids[0] != "orphan" || ids[1] != "mine" {
		t.Fatalf("replay %q", ids)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const (
	hubURL = "https://example.com/.well-known/mercure"
	topic  = "https://example.com/books/1"
)

// instance is one app instance: a hub on its own pool and store.
type instance struct {
	hub   *mercure.Hub
	store *pgstore.Store
	pool  *pgxpool.Pool
	srv   *httptest.Server
}

func newInstance(t *testing.T, dsn, prefix string, opts ...pgstore.Option) *instance {
	t.Helper()
	pool := newPool(t, dsn)
	st := open(t, pool, prefix, opts...)
	h, err := mercure.New(hubURL, mercure.WithStore(st),
		mercure.WithAnonymousSubscribers(), mercure.WithInsecurePublishing(), mercure.WithSubscriptions(),
		mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{hub: h, store: st, pool: pool, srv: httptest.NewServer(h)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		in.srv.Close()
		st.Close()
	})
	return in
}

// subscribe opens a stream on in matching topic, resuming after
// lastEventID when it is not empty.
func subscribe(t *testing.T, in *instance, lastEventID string) *ssetest.Stream {
	t.Helper()
	return ssetest.Subscribe(t, in.srv, "/.well-known/mercure", "match="+url.QueryEscape(topic), lastEventID)
}

func publish(in *instance, data string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return in.hub.Publish(ctx, mercure.Update{Topics: []string{topic}, Data: data})
}

func mustPublish(t *testing.T, in *instance, data string) string {
	t.Helper()
	id, err := publish(in, data)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestTwoHubsReconnectToOtherInstance: a subscriber of hub A gets what
// hub B publishes, leaves, and resumes on hub B with Last-Event-ID; it
// misses nothing published on either meanwhile and gets nothing twice
// (REC-4 across instances). A hub started on tables with history knows
// the last event id (REC-13).
func TestTwoHubsReconnectToOtherInstance(t *testing.T) {
	pool, prefix := db(t)
	dsn := pool.Config().ConnString()
	a, b := newInstance(t, dsn, prefix), newInstance(t, dsn, prefix)
	sub := subscribe(t, a, "")
	var first []string
	for i, in := range []*instance{b, a, b} {
		first = append(first, mustPublish(t, in, fmt.Sprint("first ", i)))
	}
	if got := sub.Collect(3); !slices.Equal(got, first) {
		t.Fatalf("instance A sent %q, want %q", got, first)
	}
	sub.Close()
	var rest []string
	for i, in := range []*instance{a, b, a, b} {
		rest = append(rest, mustPublish(t, in, fmt.Sprint("rest ", i)))
	}
	resumed := subscribe(t, b, first[2])
	if h := resumed.Header.Get("Mercure-Last-Event-ID"); h != first[2] {
		t.Fatalf("Mercure-Last-Event-ID %q, want %q (REC-9)", h, first[2])
	}
	if got := resumed.Collect(len(rest)); !slices.Equal(got, rest) {
		t.Fatalf("instance B resumed with %q, want %q", got, rest)
	}
	all := replayAll(t, b.store, mercure.Earliest) // subscription events too
	c := newInstance(t, dsn, prefix)
	if got, want := c.hub.LastEventID(), all[len(all)-1].ID; got != want {
		t.Fatalf("a third hub's LastEventID %q, want %q", got, want)
	}
}

// TestTwoHubsPostgresRestartMidStream kills and restarts PostgreSQL while
// a subscriber of hub B follows updates published on hub A (with Publish
// and with PublishTx): publishing fails fast during the outage (ErrStore,
// HTTP 503), both hubs report it, and the subscriber gets every
// acknowledged update exactly once, in order, without reconnecting.
func TestTwoHubsPostgresRestartMidStream(t *testing.T) {
	srv := pgtest.Start(t)
	opts := []pgstore.Option{pgstore.WithTimeout(time.Second), pgstore.WithPollInterval(100 * time.Millisecond)}
	a := newInstance(t, srv.DSN, "mercure", opts...)
	b := newInstance(t, srv.DSN, "mercure", opts...)
	sub := subscribe(t, b, "")
	var acked []string
	for i := range 5 {
		acked = append(acked, mustPublish(t, a, fmt.Sprint("before ", i)))
	}
	srv.Kill()
	start := time.Now()
	if _, err := publish(a, "during"); !errors.Is(err, mercure.ErrStore) {
		t.Fatalf("publish during the outage: %v, want ErrStore", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("publish took %v to fail", d)
	}
	resp, err := http.PostForm(a.srv.URL+"/.well-known/mercure", url.Values{"topic": {topic}, "data": {"during"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("HTTP publish during the outage: %s, want 503", resp.Status)
	}
	waitFor(t, "both hubs to report the outage", func() bool {
		return a.hub.Stats().FeedError != nil && b.hub.Stats().FeedError != nil
	})
	srv.Start()
	waitFor(t, "both hubs to report the feed back", func() bool {
		return a.hub.Stats().FeedError == nil && b.hub.Stats().FeedError == nil
	})
	waitFor(t, "a publish to succeed", func() bool {
		id, err := publish(a, "after 0")
		if err == nil {
			acked = append(acked, id)
		}
		return err == nil
	})
	ctx := context.Background()
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.store.PublishTx(ctx, tx, mercure.Update{Topics: []string{topic}, Data: "in a transaction"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, id)
	if got := sub.Collect(len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("subscriber of B got %q\nwant %q", got, acked)
	}
	resumed := subscribe(t, a, acked[1])
	if got := resumed.Collect(len(acked) - 2); !slices.Equal(got, acked[2:]) {
		t.Fatalf("replay on A after the restart: %q\nwant %q", got, acked[2:])
	}
}

// TestSharedSubscriptions: the subscriptions API of any hub lists the
// subscribers of all (ACT-12 across instances); those of a hub that dies
// without a word expire.
func TestSharedSubscriptions(t *testing.T) {
	pool, prefix := db(t)
	dsn := pool.Config().ConnString()
	ttl := pgstore.WithSubscriptionTTL(600 * time.Millisecond)
	a, b := newInstance(t, dsn, prefix, ttl), newInstance(t, dsn, prefix, ttl)
	subscribe(t, a, "")
	subscribe(t, b, "")
	listed := func(in *instance) int {
		subs, err := in.hub.Subscriptions(context.Background())
		if err != nil {
			return -1
		}
		n := 0
		for _, s := range subs {
			if s.Match == topic && s.Active {
				n++
			}
		}
		return n
	}
	waitFor(t, "each hub to list both subscribers", func() bool { return listed(a) == 2 && listed(b) == 2 })
	// A dies: its pool goes first, so that its store cannot withdraw
	// its subscriptions nor refresh them.
	a.pool.Close()
	a.store.Close()
	waitFor(t, "A's subscriber to expire from B's list", func() bool { return listed(b) == 1 })
}
