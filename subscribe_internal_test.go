package mercure

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// flushCounter is a ResponseWriter that records what a stream writes and
// how many times it flushes.
type flushCounter struct {
	header  http.Header
	mu      sync.Mutex
	body    strings.Builder
	flushes int
}

func (f *flushCounter) Header() http.Header { return f.header }
func (f *flushCounter) WriteHeader(int)     {}
func (f *flushCounter) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.body.Write(b)
}
func (f *flushCounter) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes++
}

// state returns the events written, the stream's starting position (an
// id-only block) left out, and the flushes.
func (f *flushCounter) state() (events, flushes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Count(withoutPosition(f.body.String()), "\n\n"), f.flushes
}

// withoutPosition returns body without the id-only block it starts with,
// if any (see positionBlock).
func withoutPosition(body string) string {
	if block, rest, ok := strings.Cut(body, "\n\n"); ok && strings.HasPrefix(block, "id: ") && !strings.Contains(block, "\n") {
		return rest
	}
	return body
}

// serveStream runs a stream of h for query on a flushCounter, once its
// headers are flushed; stop ends it and shuts h down.
func serveStream(t *testing.T, h *Hub, query string) (w *flushCounter, stop func()) {
	t.Helper()
	w = &flushCounter{header: http.Header{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, h.Path()+"?"+query, nil))
	}()
	testwait.For(t, "the stream to start", func() bool { _, f := w.state(); return f == 1 })
	return w, func() {
		cancel()
		<-done
		h.Shutdown(context.Background())
	}
}

// Limits.WriteDelay: updates that arrive within the delay of the last write go
// out together, in one write and one flush; a first update goes out at once.
// The test runs in a synctest bubble: the delay passes on its clock.
func TestWriteDelayCoalescesWrites(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, err := New("https://example.com/.well-known/mercure", WithLimits(Limits{WriteDelay: time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		w, stop := serveStream(t, h, "match=x")
		defer stop()

		publish := func() {
			if _, err := h.Publish(context.Background(), Update{Topics: []string{"x"}}); err != nil {
				t.Fatal(err)
			}
		}
		// The first update goes out at once, with its own flush after the
		// headers': nothing was written within the delay.
		start := time.Now()
		publish()
		testwait.For(t, "the first event", func() bool { e, f := w.state(); return e == 1 && f == 2 })
		if d := time.Since(start); d >= 500*time.Millisecond {
			t.Fatalf("the first update took %v: it waited for the one-second delay", d)
		}
		// Nine more, 5 ms apart: without a delay each would get its own
		// write; all arrive well inside the one-second delay, and go out
		// together when it ends.
		for range 9 {
			publish()
			time.Sleep(5 * time.Millisecond)
		}
		// The flush follows the last write: wait for it too.
		testwait.For(t, "10 events, flushed", func() bool { e, f := w.state(); return e == 10 && f >= 3 })
		if _, flushes := w.state(); flushes != 3 {
			t.Fatalf("%d flushes for 10 updates, want 3", flushes)
		}
	})
}

// A write delay never lets the queue overflow: once it is half full the
// writer stops waiting (in a synctest bubble, as above).
func TestWriteDelayDoesNotOverflow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, err := New("https://example.com/.well-known/mercure", WithLimits(Limits{WriteDelay: time.Second}),
			WithLimits(Limits{QueueEvents: 8}))
		if err != nil {
			t.Fatal(err)
		}
		w, stop := serveStream(t, h, "match=x")
		defer stop()
		// One update every 2 ms: within the one-second delay a queue of 8
		// would overflow after 16 ms; half full, the writer must go at once.
		for range 40 {
			if _, err := h.Publish(context.Background(), Update{Topics: []string{"x"}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		testwait.For(t, "40 events", func() bool { e, _ := w.state(); return e == 40 })
		if st := h.Metrics(); st.Overflows != 0 {
			t.Fatalf("%d overflows", st.Overflows)
		}
	})
}

// The hub refuses topics the resolver would not parse.
func TestMaxTopicBytesMatchesResolver(t *testing.T) {
	t.Parallel()
	if maxTopicBytes != topicurl.MaxTopicLength {
		t.Fatalf("maxTopicBytes %d, resolver limit %d", maxTopicBytes, topicurl.MaxTopicLength)
	}
}
