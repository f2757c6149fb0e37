package pgstore_test

import (
	"context"
	"errors"
	"slices"
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

// migrateWith runs the statements of Migrations(prefix, from) in one
// transaction, as an application's migration tool would.
func migrateWith(t *testing.T, pool *pgxpool.Pool, prefix string, from int, stmts ...string) {
	t.Helper()
	if stmts == nil {
		var err error
		if stmts, err = pgstore.Migrations(prefix, from); err != nil {
			t.Fatal(err)
		}
	}
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(context.Background(), s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// With WithoutMigrations, New creates nothing and fails with ErrSchema
// until the application has run the statements of Migrations; then the
// store works on the tables they made.
func TestWithoutMigrations(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	ctx := context.Background()
	_, err := pgstore.New(ctx, pool, pgstore.WithPrefix(prefix), pgstore.WithoutMigrations())
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "pgstore.Migrations") {
		t.Fatalf("New without tables: %v, want ErrSchema naming pgstore.Migrations", err)
	}
	if got := leftovers(t, pool, prefix); len(got) != 0 {
		t.Fatalf("New WithoutMigrations created %q", got)
	}
	migrateWith(t, pool, prefix, 0)
	s := open(t, pool, prefix, pgstore.WithoutMigrations())
	mustAppend(t, s, "e1")
	if _, ids := storetest.ReplayIDs(t, s, store.Earliest); !slices.Equal(ids, []string{"e1"}) {
		t.Fatalf("replay %q", ids)
	}
}

// Tables of version 1 with an event: WithoutMigrations refuses them,
// naming the migration to run; Migrations(prefix, 1) takes them to the
// current version, as New does for another prefix, keeping the event.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, byApp := range []bool{false, true} {
		pool, prefix := db(t)
		all, err := pgstore.Migrations(prefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The table of versions, version 1, and its record.
		migrateWith(t, pool, prefix, 0, all[0], all[1], `INSERT INTO `+prefix+`_schema VALUES (1)`)
		if _, err := pool.Exec(ctx, `SELECT * FROM `+prefix+`_append(10, ARRAY['old'], ARRAY['{"t":["x"],"i":"old","d":"v1"}']::json[], ARRAY[now()], 0)`); err != nil {
			t.Fatal(err)
		}
		_, err = pgstore.New(ctx, pool, pgstore.WithPrefix(prefix), pgstore.WithoutMigrations())
		if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), `pgstore.Migrations("`+prefix+`", 1)`) {
			t.Fatalf("New WithoutMigrations on version 1: %v", err)
		}
		var s *pgstore.Store
		if byApp {
			migrateWith(t, pool, prefix, 1)
			s = open(t, pool, prefix, pgstore.WithoutMigrations())
		} else {
			s = open(t, pool, prefix)
		}
		var v int
		if err := pool.QueryRow(ctx, `SELECT version FROM `+prefix+`_schema`).Scan(&v); err != nil || v != pgstore.SchemaVersion {
			t.Fatalf("version %d (%v) after the migration", v, err)
		}
		mustAppend(t, s, "new")
		got := replayAll(t, s, store.Earliest)
		if len(got) != 2 || got[0].ID != "old" || got[0].Data != "v1" || got[1].ID != "new" || got[1].Seq != 2 {
			t.Fatalf("after the migration (by the app: %v): %q", byApp, ids(got))
		}
	}
}

func TestMigrationsRefuses(t *testing.T) {
	t.Parallel()
	if _, err := pgstore.Migrations("Bad Prefix", 0); !errors.Is(err, mercure.ErrInvalidOption) {
		t.Errorf("bad prefix: %v", err)
	}
	for _, v := range []int{-1, pgstore.SchemaVersion + 1} {
		if _, err := pgstore.Migrations("mercure", v); !errors.Is(err, pgstore.ErrSchema) {
			t.Errorf("from version %d: %v", v, err)
		}
	}
	if stmts, err := pgstore.Migrations("mercure", pgstore.SchemaVersion); err != nil || len(stmts) != 1 {
		t.Errorf("from the current version: %q, %v; want only the version's record", stmts, err)
	}
}

// The tests' cleanup drops every table and function a store creates.
func TestCleanupLeavesNothing(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	s := open(t, pool, prefix)
	mustAppend(t, s, "x")
	s.Close()
	if got := leftovers(t, pool, prefix); len(got) == 0 {
		t.Fatal("no table or function found with the prefix: the check finds nothing")
	}
	if err := pgtest.Drop(pool, prefix); err != nil {
		t.Fatal(err)
	}
	if got := leftovers(t, pool, prefix); len(got) != 0 {
		t.Fatalf("left after the cleanup: %q", got)
	}
}

// Listing the shared subscriptions writes nothing: it works on a
// read-only connection. The rows of a store that stopped refreshing them
// are not listed, and another store's feed deletes them within a TTL.
func TestSubscriptionsListingIsRead(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	ctx := context.Background()
	// Long enough that the writer's refreshes keep its rows live on a
	// loaded machine; the dead store's rows are swept within it.
	ttl := pgstore.WithSubscriptionTTL(2 * time.Second)
	writer := open(t, pool, prefix, ttl)
	sub := store.Subscription{ID: "/s/1", Active: true, JSON: []byte(`{"id":"/s/1","match":"x"}`)}
	if err := writer.UpdateSubscriptions(ctx, []store.Subscription{sub}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+prefix+`_hubs VALUES ('00000000-0000-0000-0000-000000000001', now() - interval '1 hour');
		INSERT INTO `+prefix+`_subs VALUES ('00000000-0000-0000-0000-000000000001', '/s/dead', '{"id":"/s/dead"}')`); err != nil {
		t.Fatal(err)
	}
	cfg := pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	ro, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	reader := open(t, ro, prefix, pgstore.WithoutMigrations(), pgstore.WithSubscriptionTTL(time.Hour))
	subs, err := reader.Subscriptions(ctx)
	if err != nil {
		t.Fatalf("listing on a read-only connection: %v", err)
	}
	if len(subs) != 1 || subs[0].ID != "/s/1" {
		t.Fatalf("listed %+v, want the live store's subscription only", subs)
	}
	storetest.WaitFor(t, "the expired store's rows to be swept", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+prefix+`_hubs) + (SELECT count(*) FROM `+prefix+`_subs WHERE id = '/s/dead')`).Scan(&n)
		return err == nil && n == 1 // the writer's row alone
	})
}
