package mercure

import (
	"fmt"
	"net/http"
	"time"
)

// WithDrain makes [Hub.Shutdown] end the open streams gradually over d
// rather than all at once: each stream, at its turn, gets a retry field
// of about a second (with jitter) and a clean end, so that its client
// reconnects (to another instance, in a rolling deploy) soon, and the
// reconnections spread over d instead of arriving in the same second.
// Meanwhile the hub publishes and delivers as usual; a subscribe request
// gets a stream that holds only such a retry and ends at once, since an
// EventSource gives up for good on any status but 200; [Hub.Live] and
// [Hub.Ready] report [ErrHubClosed], so that load balancers stop
// sending clients. When Shutdown's context allows less than d, the drain
// is compressed to fit. 0, the default, ends every stream at once.
func WithDrain(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: WithDrain(%v) is negative", ErrInvalidOption, d)
		}
		c.drain = d
		return nil
	}
}

// serveDrained answers a subscribe request during a drain: a stream
// that sets the reconnection delay and ends, so that the client tries
// again soon (elsewhere, or here once the hub is back) rather than give
// up, as an EventSource does on any status but 200.
func serveDrained(w http.ResponseWriter) {
	retryStream(w, "", time.Second) // the delay of engine.RetryField
}
