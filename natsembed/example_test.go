package natsembed_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/natsembed"
)

// A single node: JetStream in the application's process, reached through
// an in-process connection.
func Example() {
	dir, err := os.MkdirTemp("", "natsembed-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	node, err := natsembed.Start(natsembed.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Shutdown()
	ctx := context.Background()
	if err := node.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}

	nc, err := node.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close() // before node.Shutdown: deferred calls run last first
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "UPDATES",
		Subjects: []string{"updates.>"},
		Replicas: node.Replicas(),
	})
	if err != nil {
		log.Fatal(err)
	}
	ack, err := js.Publish(ctx, "updates.books", []byte(`{"status":"checked out"}`))
	if err != nil {
		log.Fatal(err)
	}
	msg, err := stream.GetMsg(ctx, ack.Sequence)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replicas:", node.Replicas())
	fmt.Println(msg.Subject, string(msg.Data))
	// Output:
	// replicas: 1
	// updates.books {"status":"checked out"}
}

// Three instances of an application, on the hosts hub-1, hub-2 and hub-3,
// form one JetStream cluster. Each runs this code with its own
// HUB_INSTANCE; they may start in any order.
func Example_cluster() {
	instance := os.Getenv("HUB_INSTANCE") // "hub-1", "hub-2" or "hub-3"
	node, err := natsembed.Start(natsembed.Config{
		Name:          instance,
		Dir:           "/var/lib/hub/jetstream",
		ClusterListen: ":6222",
		// The same list on every instance, its own address included.
		Routes: []string{"hub-1:6222", "hub-2:6222", "hub-3:6222"},
		Logger: slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Shutdown()

	// The first time, all three instances must be up for the cluster to
	// form; later, two are enough.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := node.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}
	nc, err := node.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	// Replicas is 3: each message is stored on the three instances, and
	// publishes are acknowledged once two of them have it.
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:     "UPDATES",
		Subjects: []string{"updates.>"},
		Replicas: node.Replicas(),
	})
	if err != nil {
		log.Fatal(err)
	}
}
