package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/pgstore/pgtest"
	"github.com/mercurekit/mercure/storetest"
)

// TestOutageSuite runs the outage cases shared with the other stores on
// the network: PostgreSQL killed and restarted (a server of the test's
// own), and a store's connections cut by a proxy.
func TestOutageSuite(t *testing.T) {
	t.Parallel()
	storetest.RunOutage(t, func(t *testing.T, restartable bool) *storetest.OutageServer {
		var dsn, prefix string
		var srv *pgtest.Server
		if restartable {
			srv = pgtest.Start(t)
			dsn, prefix = srv.DSN, "mercure"
		} else {
			var pool *pgxpool.Pool
			pool, prefix = db(t)
			dsn = pool.Config().ConnString()
		}
		// The schema is created here, with the default timeout: the
		// cases' stores have a short one, for the outages, which a loaded
		// machine's migration could run out.
		migrate := newPool(t, dsn)
		s, err := pgstore.New(context.Background(), migrate, pgstore.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		migrate.Close()
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.ConnConfig
		p := storetest.StartProxy(t, fmt.Sprintf("%s:%d", c.Host, c.Port), nil)
		host, port, _ := strings.Cut(p.Addr(), ":")
		through := fmt.Sprintf("postgres://%s@%s:%s/%s?sslmode=disable", c.User, host, port, c.Database)
		o := &storetest.OutageServer{
			Open: func(t *testing.T, keep int, cut bool) store.Store {
				opts := []pgstore.Option{pgstore.WithTimeout(time.Second), pgstore.WithPollInterval(100 * time.Millisecond)}
				if keep > 0 {
					opts = append(opts, pgstore.WithMaxEvents(int64(keep)))
				}
				if cut {
					return open(t, newPool(t, through), prefix, opts...)
				}
				return open(t, newPool(t, dsn), prefix, opts...)
			},
			Cut: p.Cut, Mend: p.Mend, LoseReply: p.LoseReply, Timeout: time.Second,
		}
		if srv != nil {
			o.Kill = func(*testing.T) { srv.Kill() }
			o.Restart = func(*testing.T) { srv.Start() }
		}
		return o
	})
}

// PostgreSQL killed and restarted: an update published in a transaction
// after the restart is delivered once, in order after those before.
func TestPublishTxAfterRestart(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pool := newPool(t, srv.DSN)
	s := open(t, pool, "mercure", pgstore.WithTimeout(time.Second), pgstore.WithPollInterval(100*time.Millisecond))
	f := listen(t, s)
	mustAppend(t, s, "before")
	f.wait(t, 1)
	srv.Kill()
	f.wantStatus(t, true, storetest.Deadline)
	srv.Start()
	f.wantStatus(t, false, storetest.Deadline)
	ctx := context.Background()
	storetest.WaitFor(t, "a transaction to commit", func() bool {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return publishTx(s, tx, upd("in-tx")) }) == nil
	})
	// The marker follows in-tx, committed: "before" passed again after
	// the restart, or in-tx twice, would come before it.
	if got := ids(f.settle(t, 2)); strings.Join(got, " ") != "before in-tx" {
		t.Fatalf("feed: %q", got)
	}
}

// TestCrashBeforeSequencing: a transaction's row committed without a
// seq (its PublishTx notification lost, or its hub killed before a
// round) delays the update until a store's poll, never loses it.
func TestCrashBeforeSequencing(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	if _, ids := storetest.ReplayIDs(t, s, store.Earliest); len(ids) != 2 || ids[0] != "orphan" || ids[1] != "mine" {
		t.Fatalf("replay %q", ids)
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
func subscribe(t *testing.T, in *instance, lastEventID string) *storetest.Stream {
	t.Helper()
	return storetest.Subscribe(t, in.srv, "/.well-known/mercure", "match="+url.QueryEscape(topic), lastEventID)
}

// TestSharedSubscriptions: the subscriptions API of any hub lists the
// subscribers of all (ACT-12 across instances); those of a hub that dies
// without a word expire.
func TestSharedSubscriptions(t *testing.T) {
	t.Parallel()
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
	storetest.WaitFor(t, "each hub to list both subscribers", func() bool { return listed(a) == 2 && listed(b) == 2 })
	// A dies: its pool goes first, so that its store cannot withdraw
	// its subscriptions nor refresh them.
	a.pool.Close()
	a.store.Close()
	storetest.WaitFor(t, "A's subscriber to expire from B's list", func() bool { return listed(b) == 1 })
}
