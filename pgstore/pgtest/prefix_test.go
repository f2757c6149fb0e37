package pgtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure/storetest"
)

// Drop drops what a prefix holds, and tries again when PostgreSQL aborts
// it to end a deadlock: here with a transaction that holds the second
// table and then asks for the first, which Drop holds while it waits for
// the second.
func TestDropOutlivesADeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	prefix := fmt.Sprintf("pgtest%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s_a (x int); CREATE TABLE %[1]s_b (x int);
		CREATE FUNCTION %[1]s_f() RETURNS int LANGUAGE sql AS 'SELECT 1'`, prefix)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Drop(pool, prefix) })

	other, err := pgx.Connect(ctx, DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// This side never looks for the deadlock: Drop's side finds it, and
	// is the one aborted.
	if _, err := tx.Exec(ctx, `SET LOCAL deadlock_timeout = '1min'; SELECT FROM `+prefix+`_b`); err != nil {
		t.Fatal(err)
	}
	dropped := make(chan error, 1)
	go func() { dropped <- Drop(pool, prefix) }()
	storetest.WaitFor(t, "Drop to wait for the second table", func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted AND relation = $1::regclass)`, prefix+"_b").Scan(&waiting)
		return err == nil && waiting
	})
	// Drop holds the first table: this waits until PostgreSQL aborts Drop.
	if _, err := tx.Exec(ctx, `SELECT FROM `+prefix+`_a`); err != nil {
		t.Fatalf("the transaction was the one aborted: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-dropped; err != nil {
		t.Fatalf("Drop: %v", err)
	}
	if left, err := Leftovers(pool, prefix); err != nil || len(left) != 0 {
		t.Fatalf("left behind: %q (%v)", left, err)
	}
}
