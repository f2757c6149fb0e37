package redistest

import (
	"os"
	"testing"

	"github.com/mercurekit/mercure/storetest"
)

// Env names the variable that holds the address of the Redis server the
// tests may use, such as localhost:6399. Without it the Redis tests skip.
const Env = "MERCURE_TEST_REDIS"

// Want is what the Redis tests skip for want of, for [storetest.ReportSkips].
var Want = storetest.Want{What: "a Redis server", How: "set " + Env + "=host:port (such as localhost:6399)"}

// Addr returns the address named by MERCURE_TEST_REDIS, or skips t,
// counting the skip for [storetest.ReportSkips].
func Addr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(Env)
	if addr == "" {
		storetest.Skip(t, Want)
	}
	return addr
}
