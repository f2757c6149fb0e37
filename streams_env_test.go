package mercure

import "os"

// MERCURE_TEST_GOROUTINE_STREAMS=1 runs the package's tests with every
// hub's streams written by their handlers' goroutines (see
// WithGoroutineStreams): .ci/run runs them both ways.
func init() {
	goroutineStreamsByDefault = os.Getenv("MERCURE_TEST_GOROUTINE_STREAMS") == "1"
}
