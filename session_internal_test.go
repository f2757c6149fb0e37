package mercure

import (
	"net/http"
	"testing"
	"time"
)

// TestRecheckDelaySpread: re-checks come due between half the interval
// and the interval, spread at random, so that streams opened together do
// not call the Authorizer together.
func TestRecheckDelaySpread(t *testing.T) {
	t.Parallel()
	h, err := New("https://example.com/.well-known/mercure", WithAuthorizer(func(*http.Request) (*Access, error) { return nil, nil }, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(t.Context())
	seen := make(map[time.Duration]bool)
	for range 1000 {
		d := h.recheckDelay()
		if d < 30*time.Second || d > time.Minute {
			t.Fatalf("delay %v outside [30s, 1m]", d)
		}
		seen[d.Truncate(time.Millisecond)] = true
	}
	if len(seen) < 900 {
		t.Fatalf("1000 delays fell on %d distinct milliseconds: not spread", len(seen))
	}
}
