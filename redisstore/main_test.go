package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mercurekit/mercure/storetest"
)

// quiet drops go-redis's own log lines: the outage tests make it log
// every failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain runs up to 8 parallel tests at once; it also checks that the
// stores' goroutines (feed reader, subscriptions writer) end with them,
// and says how many tests skipped for want of a Redis server
// (MERCURE_TEST_REDIS).
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	storetest.Parallel(8) // the parallel tests wait on servers, not on a CPU
	goleak.VerifyTestMain(storetest.ReportSkips("redisstore", m))
}
