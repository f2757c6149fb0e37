package pgstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mercurekit/mercure/internal/skips"
)

// TestMain also checks that the stores' goroutines (feed, subscriptions
// refresher) end with them, and says how many tests skipped for want of a
// PostgreSQL server (MERCURE_TEST_POSTGRES).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(skips.Report("pgstore", m))
}
