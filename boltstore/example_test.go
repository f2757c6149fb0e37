package boltstore_test

import (
	"context"
	"log"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/boltstore"
)

// A hub whose history survives restarts: the last 100 000 updates of the
// past day, in one file.
func ExampleOpen() {
	store, err := boltstore.Open("/var/lib/myapp/mercure.db",
		boltstore.WithMaxEvents(100_000), boltstore.WithMaxAge(24*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // after the hub's Shutdown: defers run last first
	hub, err := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithStore(store),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	// Mount hub on the application's mux, as with any hub.
}
