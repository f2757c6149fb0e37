package pgstore_test

import (
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/storetest"
)

func TestSuite(t *testing.T) {
	// Not parallel: the suite measures the live heap (see storetest.Run).
	storetest.Run(t, func(t *testing.T) mercure.Store {
		pool, prefix := db(t)
		return open(t, pool, prefix)
	})
}

func TestRetention(t *testing.T) {
	t.Parallel()
	storetest.RunRetention(t, func(t *testing.T, keep int) mercure.Store {
		pool, prefix := db(t)
		return open(t, pool, prefix, pgstore.WithMaxEvents(int64(keep)))
	})
}

// TestCluster runs the hub-level contract with hubs on stores of one
// database, each with its own pool, beside the other tests: its cases
// check what is delivered, never how fast.
func TestCluster(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	dsn := pool.Config().ConnString()
	storetest.RunCluster(t, func(t *testing.T) mercure.Store {
		return open(t, newPool(t, dsn), prefix)
	})
}

// TestEndStreamsAcrossHubs: EndStreams on one hub ends the selected
// streams of both hubs sharing a database.
func TestEndStreamsAcrossHubs(t *testing.T) {
	pool, prefix := db(t)
	dsn := pool.Config().ConnString()
	storetest.RunEndStreams(t, func(t *testing.T) (a, b mercure.Store) {
		return open(t, newPool(t, dsn), prefix), open(t, newPool(t, dsn), prefix)
	})
}
