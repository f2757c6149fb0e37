package mercure

import "os"

// MERCURE_TEST_LOW_MEMORY=1 runs the package's tests with every hub in
// low-memory mode (see WithLowMemoryStreams): .ci/run runs them both ways.
func init() {
	lowMemoryByDefault = os.Getenv("MERCURE_TEST_LOW_MEMORY") == "1"
}
