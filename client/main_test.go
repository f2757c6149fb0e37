package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a
// subscription reads in its consumer's goroutine and must leave nothing
// running once the loop ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
