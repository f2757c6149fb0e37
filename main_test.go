package mercure_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mercurekit/mercure/internal/testwait"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// stream and every hub goroutine must end when its work ends. It runs 16
// parallel tests at once: the longest ones wait (for a stall grace, for
// 2 000 stalled sockets to be shed) far more than they compute.
func TestMain(m *testing.M) {
	testwait.Parallel(16)
	goleak.VerifyTestMain(m)
}
