package guides_test

// The store snippets of docs/stores.md, verbatim. bbolt's runs; the
// PublishTx snippet (createTask) runs in TestGuide_PublishTx when
// MERCURE_TEST_POSTGRES names a server; the others, which name servers of
// their own (redis:6379, db:5432), are compiled only.

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/boltstore"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/redisstore"
)

func Example_bolt() {
	dir, err := os.MkdirTemp("", "mercure-guide")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := boltstore.Open(filepath.Join(dir, "mercure.db"), boltstore.WithMaxEvents(100_000))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // runs after hub.Shutdown
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithStore(store))

	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	id, err := hub.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/books/1"}, Data: "out", ID: "urn:uuid:5b1f0c3e-7d8a-4f0e-9b3c-2a6d4e8f1c70"})
	fmt.Println(id, err)
	// Output: urn:uuid:5b1f0c3e-7d8a-4f0e-9b3c-2a6d4e8f1c70 <nil>
}

func Example_redis() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
	store, err := redisstore.New(rdb, "mercure", redisstore.WithMaxLen(100_000))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // runs after hub.Shutdown
	hub, err := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithStore(store), mercure.WithSubscriptions())

	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
}

// Example_twoInstances is docs/clusters.md's instance: each instance of
// the application runs the same code, with the same hub URL and stream.
func Example_twoInstances() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis.internal:6379", ContextTimeoutEnabled: true})
	st, err := redisstore.New(rdb, "mercure") // the same stream on every instance
	if err != nil {
		log.Fatal(err)
	}
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithStore(st))

	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	defer hub.Shutdown(context.Background())
}

func Example_postgres() {
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, "postgres://app@db:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(ctx, pool, pgstore.WithMaxEvents(100_000))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // runs after hub.Shutdown
	hub, err := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithStore(store), mercure.WithSubscriptions())

	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(ctx)
	if err := createTask(ctx, pool, store, "write the docs"); err != nil {
		log.Fatal(err)
	}
}

// createTask is the handler's part of docs/stores.md's PublishTx snippet.
func createTask(ctx context.Context, pool *pgxpool.Pool, store *pgstore.Store, title string) error {
	// In a handler: the task and its update commit together, or neither does.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO tasks (title) VALUES ($1) RETURNING id`, title).Scan(&id)
		if err != nil {
			return err
		}
		_, err = store.PublishTx(ctx, tx, mercure.Update{
			Topics: []string{fmt.Sprintf("https://example.com/tasks/%d", id)},
			Data:   fmt.Sprintf(`{"id":%d,"title":%q}`, id, title),
		})
		return err
	})
	return err
}

// Example_postgresOwnMigrations is docs/stores.md's WithoutMigrations
// snippet: the application's migration runs the store's SQL, and the store
// only checks the version.
func Example_postgresOwnMigrations() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// In a migration of the application's own, in one transaction:
		stmts, err := pgstore.Migrations("mercure", 0) // from version 0: no tables yet
		if err != nil {
			log.Fatal(err)
		}
		for _, stmt := range stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				log.Fatal(err)
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// At start-up, the store only checks that the tables are at pgstore.SchemaVersion:
	store, err := pgstore.New(ctx, pool, pgstore.WithoutMigrations())

	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
}

// Example_redisSentinel is docs/stores.md's store behind Sentinel: the
// failover client follows the primary the sentinels name.
func Example_redisSentinel() {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "mercure",
		SentinelAddrs:         []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
		ContextTimeoutEnabled: true,
	})
	// Acknowledged once a replica has it: a failover loses nothing
	// acknowledged.
	store, err := redisstore.New(rdb, "mercure", redisstore.WithReplicas(1))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
}

// Example_redisCluster is docs/stores.md's store on a Redis Cluster.
func Example_redisCluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"},
		ContextTimeoutEnabled: true,
	})
	// The hash tag keeps every key of the store in one slot.
	store, err := redisstore.New(rdb, "{mercure}", redisstore.WithReplicas(1))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
}
