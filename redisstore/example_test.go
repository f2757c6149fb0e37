package redisstore_test

import (
	"context"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/redisstore"
)

// Every instance of the application runs this: all the hubs on the
// stream "mercure" act as one. An update published on any instance
// reaches the subscribers of all; a client may resume on any instance with
// Last-Event-ID; the subscriptions API of each lists the subscribers of
// all.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	store, err := redisstore.New(rdb, "mercure", redisstore.WithMaxLen(100_000))
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
	// Take the instance out of the load balancer while Redis is out of reach.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := hub.Stats().FeedError; err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	log.Fatal(http.ListenAndServe(":8080", mux))
}
