package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mercurekit/mercure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/pgstore/pgtest"
)

// strictDSN returns the DSN of the shared test server with sessions whose
// transactions are level by default (default_transaction_isolation sent
// at connection, as a runtime parameter: what ALTER DATABASE or ALTER ROLE
// … SET, as an operator may set it, gives every session, without a
// database or a role to create), and a table prefix of the test's own.
func strictDSN(t *testing.T, level string) (dsn, prefix string) {
	t.Helper()
	_, prefix = db(t)
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_transaction_isolation", level)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no + as a space
	return u.String(), prefix
}

// TestStrictDefaultIsolation runs two hubs on sessions whose default
// isolation is REPEATABLE READ or SERIALIZABLE: their stores start
// together (both migrate), 400 concurrent publishes split between them
// are all accepted, and 40 transactions of the application at the
// sessions' default level, each with its own insert and a PublishTx,
// commit without a serialization failure. Every update is delivered and
// replayed once, numbered 1, 2, 3, … without a hole.
func TestStrictDefaultIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			dsn, prefix := strictDSN(t, level)
			orders := prefix + "_orders"
			pool := newPool(t, dsn)
			ctx := context.Background()
			var got string
			if err := pool.QueryRow(ctx, `SHOW default_transaction_isolation`).Scan(&got); err != nil || got != level {
				t.Fatalf("the sessions' default isolation is %q (%v), want %q", got, err, level)
			}
			if _, err := pool.Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			stores := make([]*pgstore.Store, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i := range stores {
				wg.Go(func() { stores[i], errs[i] = pgstore.New(ctx, newPool(t, dsn), pgstore.WithPrefix(prefix)) })
			}
			wg.Wait()
			hubs := make([]*mercure.Hub, 2)
			for i, s := range stores {
				if errs[i] != nil {
					t.Fatalf("New %d: %v", i, errs[i])
				}
				t.Cleanup(func() { s.Close() })
				h, err := mercure.New(hubURL, mercure.WithStore(s), mercure.WithLogger(slog.New(slog.DiscardHandler)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { h.Shutdown(context.Background()) })
				hubs[i] = h
			}
			f := listen(t, stores[1])

			const publishes, txs = 400, 40
			var failures sync.Map
			for i := range publishes {
				wg.Go(func() {
					u := mercure.Update{Topics: []string{topic}, ID: fmt.Sprint("p", i), Data: "published"}
					if _, err := hubs[i%2].Publish(ctx, u); err != nil {
						failures.Store(u.ID, err)
					}
				})
			}
			for i := range txs {
				wg.Go(func() {
					id := fmt.Sprint("tx", i)
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { // the sessions' default level
						if _, err := tx.Exec(ctx, `INSERT INTO `+orders+` VALUES ($1)`, id); err != nil {
							return err
						}
						_, err := stores[i%2].PublishTx(ctx, tx, mercure.Update{Topics: []string{topic}, ID: id, Data: "ordered"})
						return err
					})
					if err != nil {
						failures.Store(id, err)
					}
				})
			}
			wg.Wait()
			failures.Range(func(id, err any) bool {
				var pe *pgconn.PgError
				if errors.As(err.(error), &pe) && pe.Code == "40001" {
					t.Errorf("%s: a serialization failure: %v", id, err)
				} else {
					t.Errorf("%s: %v", id, err)
				}
				return true
			})
			if t.Failed() {
				return
			}
			// Every publish and transaction has returned: the marker,
			// appended through the store listened to, follows them all.
			live := f.settle(t, publishes+txs)
			replayed := replayAll(t, stores[0], store.Earliest)
			sameOrder(t, "replay and feed", replayed, live)
			seen := map[string]bool{}
			for i, e := range replayed {
				if e.Seq != uint64(i+1) {
					t.Fatalf("event %d (%s) has Seq %d: numbers must be 1, 2, 3, … without a hole", i, e.ID, e.Seq)
				}
				if seen[e.ID] {
					t.Fatalf("%s recorded twice", e.ID)
				}
				seen[e.ID] = true
			}
		})
	}
}
