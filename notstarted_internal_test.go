package mercure

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/store"
)

// A stream whose queue overflows before its headers are sent cannot
// start (issue 41: under heavy publishing with a small queue, 4 of 300
// subscribers got EOF before any status line, and all 300 counted as
// opened). It is answered as the hub refuses for now, 503 with
// Retry-After and a problem document, or for an EventSource the stream
// that tells it when to come back, and counts neither as opened nor as
// closed. The stream is held between its registration and its headers
// (the hub's presence lock, taken to list its subscriptions), while
// more updates than its queue holds are dispatched to it.
func TestStreamThatCannotStartIsRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"detached", "goroutine"} {
		for _, c := range []struct {
			name, accept string
			replay       bool
		}{{"problem", "", false}, {"problem after Last-Event-ID", "application/problem+json", true}, {"EventSource", "text/event-stream", false}} {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				engine := WithDetachedStreams()
				if mode == "goroutine" {
					engine = WithGoroutineStreams()
				}
				h, err := New("https://example.com/.well-known/mercure", engine, WithInsecurePublishing(), WithSubscriptions(), WithLimits(Limits{QueueEvents: 1}))
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(h)
				defer srv.Close()
				defer h.Shutdown(context.Background())

				h.presence.mu.Lock() // holds the stream between its registration and its headers
				locked := true
				defer func() {
					if locked {
						h.presence.mu.Unlock()
					}
				}()
				conn, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				req := fmt.Sprintf("GET %s?match=x HTTP/1.1\r\nHost: example.com\r\n", h.Path())
				if c.accept != "" {
					req += "Accept: " + c.accept + "\r\n"
				}
				if c.replay {
					req += "Last-Event-ID: " + store.Earliest + "\r\n"
				}
				if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
					t.Fatal(err)
				}
				testwait.For(t, "the stream to register", func() bool { return h.engine.Streams() == 1 }) // not Metrics: it takes the presence lock
				for i := range 3 {                                                                        // the first is queued, the second overflows the queue
					if _, err := h.Publish(context.Background(), Update{Topics: []string{"x"}, Data: fmt.Sprint(i)}); err != nil {
						t.Fatal(err)
					}
				}
				if err := h.engine.WaitDispatched(context.Background()); err != nil {
					t.Fatal(err)
				}
				h.presence.mu.Unlock()
				locked = false

				res, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatalf("no status line: %v, want a refusal", err)
				}
				body, _ := io.ReadAll(res.Body)
				switch {
				case c.accept == "text/event-stream":
					if res.StatusCode != http.StatusOK || !strings.Contains(string(body), ": 503 ") || !strings.Contains(string(body), "retry: ") || strings.Contains(string(body), "id:") {
						t.Fatalf("%d %q, want the stream that says 503 and when to retry, without an id", res.StatusCode, body)
					}
				default:
					if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
						res.Header.Get("Content-Type") != "application/problem+json" || res.Header.Get("Mercure-Last-Event-ID") != "" {
						t.Fatalf("%d %v %q, want 503 with Retry-After and a problem document", res.StatusCode, res.Header, body)
					}
				}
				testwait.For(t, "the stream's slot to be freed", func() bool { return h.Metrics().Streams == 0 })
				m := h.Metrics()
				var closed uint64
				for _, n := range m.StreamsClosed {
					closed += n
				}
				if m.StreamsOpened != 0 || closed != 0 || m.Overflows != 0 {
					t.Fatalf("opened %d, closed %v, overflows %d: want a refusal, counted in none", m.StreamsOpened, m.StreamsClosed, m.Overflows)
				}
				if want := uint64(map[bool]int{true: 1}[c.accept == "text/event-stream"]); m.SubscribesDeferred != want {
					t.Fatalf("%d subscribes deferred, want %d", m.SubscribesDeferred, want)
				}
				// The next subscriber starts, and counts.
				h.subscribeInternal(t, srv)
				testwait.For(t, "the next stream to count as opened", func() bool { return h.Metrics().StreamsOpened == 1 })
			})
		}
	}
}

// subscribeInternal opens a stream of match=x on srv and reads its
// status: 200.
func (h *Hub) subscribeInternal(t *testing.T, srv *httptest.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+h.Path()+"?match=x", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
}
