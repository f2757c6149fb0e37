package redistest_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure/storetest"
)

// quiet drops go-redis's own log lines: a failover makes it log every
// failed dial to the dead primary.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain says how many tests skipped for want of a Redis server
// (MERCURE_TEST_REDIS), redis-server or redis-cli.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(storetest.ReportSkips("redisstore/redistest", m).Run())
}
