package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/pgstore/pgtest"
	"github.com/mercurekit/mercure/storetest"
)

// newPool returns a pool of 4 connections on dsn (pgxpool's default on a
// machine of 4 cores or fewer), closed when the test ends. Each connection
// is a PostgreSQL backend whose start (a fork, cold catalog caches, the
// store's functions compiled) costs more CPU than the queries most tests
// send on it: with 40 per pool, the package's bursts started hundreds, a
// fifth of its CPU time (TestStrictDefaultIsolation alone: 6.9 -> 2.3 s).
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

var prefixN atomic.Int64

// db returns a pool on the shared test server and a table prefix of the
// test's own, whose tables are dropped when the test ends.
func db(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	pool := newPool(t, pgtest.DSN(t))
	prefix := fmt.Sprintf("t%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, prefixN.Add(1))
	t.Cleanup(func() {
		if err := pgtest.Drop(pool, prefix); err != nil {
			t.Errorf("dropping %s_*: %v", prefix, err)
		}
	})
	return pool, prefix
}

// leftovers lists what the database holds of prefix: relations and
// functions whose names start with prefix+"_".
func leftovers(t testing.TB, pool *pgxpool.Pool, prefix string) []string {
	t.Helper()
	names, err := pgtest.Leftovers(pool, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// open returns a store on pool with prefix, closed when the test ends.
// Its calls are bounded by suiteTimeout unless opts say otherwise: the
// tests that are about the store's timeout set it themselves. Every test
// opens its stores on a healthy server, so that opening is retried until
// storetest.Deadline: a short timeout can run out on a loaded machine.
func open(t testing.TB, pool *pgxpool.Pool, prefix string, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	var s *pgstore.Store
	var err error
	if !storetest.Within(storetest.Deadline, func() bool {
		s, err = pgstore.New(context.Background(), pool, append([]pgstore.Option{pgstore.WithPrefix(prefix), suiteTimeout}, opts...)...)
		return err == nil
	}) {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
