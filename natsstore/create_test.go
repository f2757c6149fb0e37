package natsstore_test

import (
	"sync"
	"testing"
	"time"

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
