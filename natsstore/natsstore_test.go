package natsstore_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

var streamN atomic.Int64

// server returns the shared nats-server, or skips the test without
// MERCURE_TEST_NATS.
func server(t testing.TB) *natstest.Shared {
	t.Helper()
	natstest.Binary(t)
	return shared
}

// streamName returns a stream name no other test uses.
func streamName() string {
	return fmt.Sprintf("T%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, streamN.Add(1))
}

// suiteTimeout bounds each call of the tests' stores: they test what a
// store does, not its per-call bound (the outage tests').
var suiteTimeout = natsstore.WithTimeout(time.Minute)

// open returns a store on the stream name through a connection of its
// own to srv, closed when the test ends.
func open(t *testing.T, url, name string, opts ...natsstore.Option) *natsstore.Store {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.Timeout(natstest.Patient))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close) // after the store closes
	var s *natsstore.Store
	if !storetest.Within(storetest.Deadline, func() bool {
		s, err = natsstore.New(nc, name, append([]natsstore.Option{suiteTimeout}, opts...)...)
		return err == nil
	}) {
		t.Fatal(err)
	}
	return s
}

func TestSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, server(t).URL, streamName(), natsstore.WithMaxLen(0))
	})
}

func TestSuiteWithDefaults(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, server(t).URL, streamName())
	})
}

func TestSuiteRetention(t *testing.T) {
	t.Parallel()
	storetest.RunRetention(t, func(t *testing.T, keep int) store.Store {
		return open(t, server(t).URL, streamName(), natsstore.WithMaxLen(int64(keep)))
	})
}

func TestCluster(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	storetest.RunCluster(t, func(t *testing.T) store.Store {
		return open(t, url, name, natsstore.WithMaxLen(0))
	})
}

func TestEndStreams(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	storetest.RunEndStreams(t, func(t *testing.T) (a, b store.Store) {
		sa, sb := open(t, url, name), open(t, url, name)
		t.Cleanup(func() { sa.Close(); sb.Close() })
		return sa, sb
	})
}
