package pgstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mercurekit/mercure/storetest"
)

// TestMain runs up to 4 parallel tests at once; it also checks that the
// stores' goroutines (feed, subscriptions refresher) end with them, and
// says how many tests skipped for want of a PostgreSQL server
// (MERCURE_TEST_POSTGRES).
func TestMain(m *testing.M) {
	storetest.Parallel(4) // the parallel tests wait on servers, not on a CPU
	goleak.VerifyTestMain(storetest.ReportSkips("pgstore", m))
}
