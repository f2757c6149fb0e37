package guides_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
)

// TestGuide_PublishTx runs docs/stores.md's PublishTx snippet (createTask)
// on a real PostgreSQL server: a subscriber hears of the task once its
// transaction commits; a private update on a hub that authorizes no
// subscriber is refused, and rolls the task back with it. Everything it
// creates lives in a schema of its own, dropped at the end.
func TestGuide_PublishTx(t *testing.T) {
	dsn := os.Getenv("MERCURE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("set MERCURE_TEST_POSTGRES to the DSN of a PostgreSQL server to run this test")
	}
	ctx := context.Background()
	schema := "guide_" + strings.ToLower(rand.Text()[:10])
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".tasks (id bigserial PRIMARY KEY, title text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")

	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(ctx, pool, pgstore.WithPrefix(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithStore(store), mercure.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Shutdown(ctx)
	srv := httptest.NewServer(hub)
	defer srv.Close()

	stream := walkStream(srv, "https://example.com/tasks/1", nil)
	defer stream.Body.Close()
	if err := createTask(ctx, pool, store, "write the docs"); err != nil {
		t.Fatalf("createTask: %v", err)
	}
	if got, want := walkData(stream), `{"id":1,"title":"write the docs"}`; got != want {
		t.Fatalf("the subscriber got %s, want %s", got, want)
	}

	// The hub authorizes no subscriber: PublishTx checks with its rules.
	err = pgxBeginPrivate(ctx, pool, store)
	if !errors.Is(err, mercure.ErrInvalidUpdate) {
		t.Fatalf("a private update on a hub without readers: %v, want ErrInvalidUpdate", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM tasks").Scan(&n); err != nil || n != 1 {
		t.Fatalf("tasks: %d, %v; want the first one only", n, err)
	}
}

// pgxBeginPrivate inserts a task and publishes a private update about it
// in one transaction.
func pgxBeginPrivate(ctx context.Context, pool *pgxpool.Pool, store *pgstore.Store) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO tasks (title) VALUES ('secret')"); err != nil {
		return err
	}
	if _, err := store.PublishTx(ctx, tx, mercure.Update{Topics: []string{"https://example.com/tasks/2"}, Data: "secret", Private: true}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
