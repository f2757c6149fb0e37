package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mercurekit/mercure/internal/skips"
)

// quiet drops go-redis's own log lines: the outage tests make it log
// every failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain also checks that the stores' goroutines (feed reader,
// subscriptions writer) end with them, and says how many tests skipped
// for want of a Redis server (MERCURE_TEST_REDIS).
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(skips.Report("redisstore", m))
}
