package pgstore_test

import (
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/storetest"
)

func TestSuite(t *testing.T) {
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
