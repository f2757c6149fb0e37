package natsembed_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// node is shut down, and every connection closed, by the test that made
// it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
