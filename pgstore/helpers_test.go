package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure/internal/pgtest"
	"github.com/mercurekit/mercure/pgstore"
)

// newPool returns a pool on dsn, closed when the test ends.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 40
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
	t.Cleanup(func() { drop(pool, prefix) })
	return pool, prefix
}

func drop(pool *pgxpool.Pool, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %[1]s_events, %[1]s_meta, %[1]s_hubs, %[1]s_subs, %[1]s_schema;
		DROP FUNCTION IF EXISTS %[1]s_sequence`, prefix))
}

// open returns a store on pool with prefix, closed when the test ends.
func open(t testing.TB, pool *pgxpool.Pool, prefix string, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(context.Background(), pool, append([]pgstore.Option{pgstore.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
