package client_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/memnet"
)

// startMemServer serves handler over in-memory connections until the test
// ends (see memnet), so that a test in a testing/synctest bubble owns the
// clock; call it inside the bubble.
func startMemServer(t *testing.T, handler http.Handler) *memnet.Server {
	t.Helper()
	return memnet.Serve(t, handler, nil)
}

// startBubbleHub is startHub for tests in a testing/synctest bubble: the
// hub is served over in-memory connections, so that its timers (token
// expiry, keep-alives) run on the bubble's clock, and its streams are
// written by their handlers' goroutines (WithGoroutineStreams: a detached
// stream's connection poller waits in the kernel, out of the bubble's
// sight). It returns the hub and the HTTP client that reaches it; call
// it inside the bubble.
func startBubbleHub(t *testing.T, opts ...mercure.Option) (*testHub, *http.Client) {
	t.Helper()
	var srv *memnet.Server
	h := serveHub(t, append(opts, mercure.WithInsecurePublishing(), mercure.WithGoroutineStreams()), func(hd http.Handler) (close func()) {
		srv = memnet.Serve(t, hd, nil)
		return srv.Close
	})
	return &testHub{Hub: h, srv: &httptest.Server{URL: "http://hub.test"}}, srv.Client
}
