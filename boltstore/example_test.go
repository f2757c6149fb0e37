package boltstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/boltstore"
)

// A hub whose history survives restarts: the last 100 000 updates of the
// past day, in one file. After a restart the hub knows the last update's
// id, and clients resume from the history in the file.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "mercure.db") // say, /var/lib/myapp/mercure.db

	// start runs the application's hub on the file until stop is called.
	start := func() (hub *mercure.Hub, stop func()) {
		store, err := boltstore.Open(path,
			boltstore.WithMaxEvents(100_000), boltstore.WithMaxAge(24*time.Hour))
		if err != nil {
			log.Fatal(err)
		}
		hub, err = mercure.New("https://example.com/.well-known/mercure", mercure.WithStore(store))
		if err != nil {
			log.Fatal(err)
		}
		// Mount hub on the application's mux, as with any hub.
		return hub, func() {
			hub.Shutdown(context.Background()) // the hub first, then its store
			store.Close()
		}
	}

	hub, stop := start()
	_, err = hub.Publish(context.Background(), mercure.Update{
		Topics: []string{"https://example.com/books/1"},
		ID:     "urn:example:checkout-1",
		Data:   `{"status":"checked out"}`,
	})
	if err != nil {
		log.Fatal(err)
	}
	stop()

	hub, stop = start() // the application restarts
	defer stop()
	fmt.Println("last update:", hub.LastEventID())
	// Output:
	// last update: urn:example:checkout-1
}
