package pgstore_test

import (
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/storetest"
)

// Hub.EndStreams on one hub ends the selected streams of both hubs
// sharing PostgreSQL tables (issue 24 item 4: "on every instance sharing
// the store"), as it does on Redis.
func TestEndStreamsAcrossHubsOnPostgres(t *testing.T) {
	pool, prefix := db(t)
	storetest.RunEndStreams(t, func(t *testing.T) (a, b mercure.Store) {
		return open(t, pool, prefix), open(t, pool, prefix)
	})
}
