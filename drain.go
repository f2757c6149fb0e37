package mercure

import (
	"net/http"
	"time"
)

// serveDrained answers a subscribe request during a drain: a stream
// that sets the reconnection delay and ends, so that the client tries
// again soon (elsewhere, or here once the hub is back) rather than give
// up, as an EventSource does on any status but 200.
func serveDrained(w http.ResponseWriter) {
	retryStream(w, "", time.Second) // the delay of engine.RetryField
}
