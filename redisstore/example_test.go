package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/redisstore"
)

// New checks its options before it connects: a bad value is an error
// wrapping [mercure.ErrInvalidOption], whether or not Redis is up. Then it
// reads the stream's last entry, and fails when Redis cannot be reached
// within [redisstore.WithTimeout]: a hub does not start without its history.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // not contacted here
	defer rdb.Close()
	_, err := redisstore.New(rdb, "mercure", redisstore.WithMaxLen(-1))
	fmt.Println(errors.Is(err, mercure.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// mercure: invalid option: redisstore.WithMaxLen(-1) is negative
}

// Every instance of the application runs this: all the hubs on the
// stream "mercure" act as one. An update published on any instance
// reaches the subscribers of all; a client may resume on any instance with
// Last-Event-ID; the subscriptions API of each lists the subscribers of
// all.
//
// This example needs a Redis server, so it is compiled but not run;
// TestTwoHubs runs two hubs sharing a stream against MERCURE_TEST_REDIS.
func Example_instances() {
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
	// Take the instance out of the load balancer while Redis is out of
	// reach, on the operators' own address: the answer says why.
	ops := http.NewServeMux()
	ops.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := hub.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	go func() { log.Fatal(http.ListenAndServe("127.0.0.1:9090", ops)) }()
	log.Fatal(http.ListenAndServe(":8080", mux))
}
