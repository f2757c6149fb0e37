package mercure

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// Routing a path costs one allocation, however many segments named
// "subscriptions" it holds: no reading of the path copies it.
func TestRoute_LinearCost(t *testing.T) {
	h, err := New("https://example.com/api/realtime/.well-known/mercure", WithSubscriptions(), WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(t.Context())
	r := httptest.NewRequest("GET", h.path+strings.Repeat("/subscriptions", 10000)+"/x", nil)
	allocs := testing.AllocsPerRun(10, func() {
		if kind, _ := h.route(r); kind != routeAPIOther {
			t.Fatalf("kind %v", kind)
		}
	})
	if allocs > 1 {
		t.Errorf("%v allocations per route, want 1", allocs)
	}
}
