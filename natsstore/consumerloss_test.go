package natsstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

// The server that holds a store's feed consumer (one replica, on any
// server of the stream's) dies while the store's own connection, to
// another server, stays up, as an embedded node's does, and the stream's
// leader too, so that every other request is answered: the feed finds
// that the stream holds a message the consumer does not deliver, reports
// the failure, and reads on through a new consumer. It stalled silently
// before: the no-responders answers to its pull requests hid the missing
// heartbeats, and events appended by another store never reached its
// listeners.
func TestFeedSurvivesItsConsumersServer(t *testing.T) {
	t.Parallel()
	ss := natstest.StartCluster(t)
	name := streamName()
	ctx := context.Background()
	js, err := jetstream.New(natstest.Connect(t, ss...))
	if err != nil {
		t.Fatal(err)
	}
	// A store through each server in turn, until one's consumer lies on
	// another server than its connection's and the stream leader's.
	var s *natsstore.Store
	var via, holder *natstest.Server
	for i := 0; holder == nil; i++ {
		if i == 30 {
			t.Fatal("every feed consumer lay on its store's server or the stream leader")
		}
		via = ss[i%len(ss)]
		before := consumers(ctx, js, name)
		// The default timeout, as a hub's: a request to create a consumer
		// on the dead server is answered by none.
		s = open(t, natstest.URLs(via), name, natsstore.WithReplicas(3), natsstore.WithTimeout(natsstore.DefaultTimeout))
		leader := ""
		storetest.WaitFor(t, "the feed's consumer", func() bool {
			for c, l := range consumers(ctx, js, name) {
				if _, ok := before[c]; !ok {
					leader = l
				}
			}
			return leader != ""
		})
		for _, srv := range ss {
			if srv.Name == leader && srv != via && srv.Name != streamLeader(ctx, t, js, name) {
				holder = srv
			}
		}
		if holder == nil {
			s.Close()
		}
	}
	t.Cleanup(func() { s.Close() })
	var got atomic.Int32
	var failed atomic.Bool
	t.Cleanup(s.Listen(store.Listener{
		Event: func(e *store.Event) {
			if e.ID == "after" {
				got.Add(1)
			}
		},
		Status: func(err error) {
			if err != nil {
				failed.Store(true)
			}
		},
	}))
	holder.Kill()
	var survivor *natstest.Server
	for _, srv := range ss {
		if srv != via && srv != holder {
			survivor = srv
		}
	}
	other := open(t, natstest.URLs(survivor), name, natsstore.WithReplicas(3))
	t.Cleanup(func() { other.Close() })
	storetest.MustAppend(t, other, storetest.NewEvent("after"))
	storetest.WaitFor(t, "the event appended after the consumer's server died", func() bool { return got.Load() == 1 })
	if !failed.Load() {
		t.Error("the feed did not report its failure")
	}
}

// consumers returns the stream's consumers (the feeds'), each with its
// server.
func consumers(ctx context.Context, js jetstream.JetStream, stream string) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	all := map[string]string{}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return all
	}
	l := st.ListConsumers(ctx)
	for info := range l.Info() {
		if info.Cluster != nil {
			all[info.Name] = info.Cluster.Leader
		}
	}
	return all
}

// streamLeader returns the name of the stream's leader.
func streamLeader(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().Cluster.Leader
}
