package guides_test

// The NATS snippets of docs/stores.md and docs/clusters.md, verbatim.
// They name servers and addresses of their own (nats-1:4222, 10.0.0.1):
// compiled only.

import (
	"context"
	"log"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/natsembed"
	"github.com/mercurekit/mercure/natsstore"
)

// Example_nats is docs/stores.md's store on an existing NATS cluster.
func Example_nats() {
	nc, err := nats.Connect("nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222",
		nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close() // after the store's Close
	store, err := natsstore.New(nc, "mercure", natsstore.WithReplicas(3))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // runs after hub.Shutdown
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithStore(store))

	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
}

// Example_threeInstances is docs/clusters.md's instance of three that are
// the cluster: hub-1's code; hub-2's and hub-3's differ by ClusterListen.
func Example_threeInstances() {
	node, err := natsembed.Start(natsembed.Config{
		Dir:           "/var/lib/mercure/nats",
		ClusterListen: "10.0.0.1:6222",
		Routes:        []string{"10.0.0.1:6222", "10.0.0.2:6222", "10.0.0.3:6222"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Shutdown() // last: after the store's Close and the hub's Shutdown
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := node.WaitReady(ctx); err != nil { // a new cluster: all three nodes
		log.Fatal(err)
	}
	nc, err := node.Connect() // in-process: no socket
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	st, err := natsstore.New(nc, "mercure", natsstore.WithReplicas(node.Replicas())) // 3
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithStore(st))

	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(ctx)
}
