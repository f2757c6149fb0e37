package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
)

// Every instance of the application runs this: all the hubs on the same
// database (and table prefix) act as one. An update published on any
// instance reaches the subscribers of all; a client may resume on any
// instance with Last-Event-ID; the subscriptions API of each lists the
// subscribers of all.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(ctx, pool, pgstore.WithMaxEvents(100_000))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // after the hub's Shutdown: defers run last first
	hub, err := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithStore(store),
		mercure.WithSubscriptions(),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	mux := http.NewServeMux()
	hub.Mount(mux)
	log.Fatal(http.ListenAndServe(":8080", mux))
}

// The application writes a row and publishes the update that describes
// it in one transaction: subscribers hear of the task if and only if it
// was committed, once, after the commit.
func ExampleStore_PublishTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO tasks (title) VALUES ($1) RETURNING id`, "Write the report").Scan(&id); err != nil {
			return err
		}
		_, err := store.PublishTx(ctx, tx, mercure.Update{
			Topics: []string{fmt.Sprintf("https://example.com/tasks/%d", id)},
			Data:   `{"title":"Write the report"}`,
		})
		return err // an error rolls back both
	})
	if errors.Is(err, mercure.ErrInvalidUpdate) {
		log.Print("the update was refused, and the task not written")
	} else if err != nil {
		log.Fatal(err)
	}
}

// With database/sql, open the database with pgx's stdlib driver, on the
// store's pool or on its own.
func ExampleStore_PublishSQLTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	tx, err := db.BeginTx(ctx, &sql.TxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // no-op after Commit
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET done = true WHERE id = $1`, 42); err != nil {
		log.Fatal(err)
	}
	if _, err := store.PublishSQLTx(ctx, tx, mercure.Update{
		Topics: []string{"https://example.com/tasks/42"},
		Data:   `{"done":true}`,
	}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}

// Options check their values: a bad one fails New with an error that
// wraps mercure.ErrInvalidOption, before anything touches the database.
func ExampleWithPrefix() {
	_, err := pgstore.New(context.Background(), nil, pgstore.WithPrefix("Not An Identifier"))
	fmt.Println(errors.Is(err, mercure.ErrInvalidOption))
	// Output: true
}

// An application that runs its own migrations gets the store's SQL from
// Migrations, applies it in one of its migration files (here, from no
// tables at all), and opens the store with
// pgstore.New(ctx, pool, pgstore.WithoutMigrations()): New then only
// checks that the tables are at SchemaVersion.
func ExampleMigrations() {
	stmts, err := pgstore.Migrations("mercure", 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range stmts {
		_ = s // written to the application's migration, in order
	}
	fmt.Println(len(stmts), "scripts to version", pgstore.SchemaVersion)
	// Output: 5 scripts to version 3
}
