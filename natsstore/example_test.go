package natsstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/natsstore"
)

// New checks its options before it reaches the servers: a bad value is
// an error wrapping [mercure.ErrInvalidOption], whether or not NATS is
// up. Then it creates or updates the stream, and fails when no server
// answers within [natsstore.WithTimeout]: a hub does not start without
// its history.
func ExampleNew() {
	// Not connected yet: RetryOnFailedConnect returns the connection
	// at once, and it keeps trying in the background.
	nc, err := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	_, err = natsstore.New(nc, "mercure", natsstore.WithReplicas(7))
	fmt.Println(errors.Is(err, mercure.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// mercure: invalid option: natsstore.WithReplicas(7) is not between 1 and 5
}

// Every instance of the application runs this: all the hubs on the
// stream "mercure" act as one, on a NATS cluster of three servers with
// JetStream. The stream keeps three replicas: an update is acknowledged
// once two servers have it, and a server may die without losing one.
// The connection carries what the cluster asks of a client: here
// credentials and TLS.
//
// This example needs NATS servers, so it is compiled but not run;
// TestCluster runs hubs sharing a stream against MERCURE_TEST_NATS.
func Example_instances() {
	nc, err := nats.Connect("tls://nats-1:4222,tls://nats-2:4222,tls://nats-3:4222",
		nats.UserCredentials("/etc/hub/nats.creds"),
		nats.RootCAs("/etc/hub/nats-ca.pem"),
		nats.MaxReconnects(-1), // follow the cluster for as long as the hub runs
	)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	store, err := natsstore.New(nc, "mercure",
		natsstore.WithReplicas(3),
		natsstore.WithMaxLen(100_000),
		natsstore.WithMaxAge(24*time.Hour),
	)
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
