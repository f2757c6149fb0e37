package pgstore_test

import (
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/storetest"
)

// suiteTimeout bounds each call of the tests' stores (see open): they test
// what a store does, not its per-call bound (the outage suite's), and
// beside two CPU hogs and other test packages one page of a replay once
// took more than the default 5 s.
var suiteTimeout = pgstore.WithTimeout(time.Minute)

func TestSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		pool, prefix := db(t)
		return open(t, pool, prefix, suiteTimeout)
	})
}

func TestRetention(t *testing.T) {
	t.Parallel()
	storetest.RunRetention(t, func(t *testing.T, keep int) store.Store {
		pool, prefix := db(t)
		return open(t, pool, prefix, pgstore.WithMaxEvents(int64(keep)), suiteTimeout)
	})
}

// TestCluster runs the hub-level contract with hubs on stores of one
// database, each with its own pool, beside the other tests: its cases
// check what is delivered, never how fast.
func TestCluster(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	dsn := pool.Config().ConnString()
	storetest.RunCluster(t, func(t *testing.T) store.Store {
		return open(t, newPool(t, dsn), prefix, suiteTimeout)
	})
}

// TestEndStreamsAcrossHubs: EndStreams on one hub ends the selected
// streams of both hubs sharing a database.
func TestEndStreamsAcrossHubs(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	dsn := pool.Config().ConnString()
	storetest.RunEndStreams(t, func(t *testing.T) (a, b store.Store) {
		return open(t, newPool(t, dsn), prefix, suiteTimeout), open(t, newPool(t, dsn), prefix, suiteTimeout)
	})
}
