package client_test

import (
	"net/http"
	"testing"

	"github.com/mercurekit/mercure/internal/memnet"
)

// startMemServer serves handler over in-memory connections until the test
// ends (see memnet), so that a test in a testing/synctest bubble owns the
// clock; call it inside the bubble.
func startMemServer(t *testing.T, handler http.Handler) *memnet.Server {
	t.Helper()
	return memnet.Serve(t, handler, nil)
}
