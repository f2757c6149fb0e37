package mercure_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// stream and every hub goroutine must end when its work ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
