package natsstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/natsstore/natstest"
)

// Three stores opened at once, each through another server of a
// cluster, on a stream that does not exist yet (the hubs of a cluster
// started together): each opens within its timeout. nats-server answers
// none of the identical creations sent at once, though it creates the
// stream and buckets; New asked again after a second.
func TestNewAtOnceOnACluster(t *testing.T) {
	t.Parallel()
	ss := natstest.StartCluster(t)
	name := streamName()
	var wg sync.WaitGroup
	for _, srv := range ss {
		nc := natstest.Connect(t, srv)
		wg.Go(func() {
			began := time.Now()
			s, err := natsstore.New(nc, name, natsstore.WithReplicas(3), natsstore.WithTimeout(10*time.Second))
			if err != nil {
				t.Errorf("New through %s: %v", srv.Name, err)
				return
			}
			defer s.Close()
			t.Logf("New through %s: %v", srv.Name, time.Since(began).Round(time.Millisecond))
		})
	}
	wg.Wait()
}

// A store opened without WithReplicas on a replicated stream keeps its
// replicas, and so do the buckets it makes: a hub started without the
// option does not scale the cluster's history down to one server.
func TestNewKeepsTheStreamsReplicas(t *testing.T) {
	t.Parallel()
	ss := natstest.StartCluster(t)
	name := streamName()
	nc := natstest.Connect(t, ss[0])
	s, err := natsstore.New(nc, name, natsstore.WithReplicas(3), natsstore.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	other := natstest.Connect(t, ss[1])
	s, err = natsstore.New(other, name, natsstore.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	js, err := jetstream.New(other)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, stream := range []string{name, "KV_" + name + "_subs", "KV_" + name + "_hubs"} {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("%s: %d replicas after New without WithReplicas, want the 3 it had", stream, r)
		}
	}
}
