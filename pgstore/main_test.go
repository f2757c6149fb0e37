package pgstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain also checks that the stores' goroutines (feed, subscriptions
// refresher) end with them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
