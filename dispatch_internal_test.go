package mercure

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// MAT-9: URL patterns are evaluated without the hub's lock: while one
// dispatch evaluates them, streams open, and the exact subscribers of the
// update being dispatched already have it.
func TestDispatchEvaluatesPatternsWithoutTheLock(t *testing.T) {
	h, err := New(WithURL("https://example.com/.well-known/mercure"))
	if err != nil {
		t.Fatal(err)
	}
	exact, stopExact := serveStream(t, h, "match=x")
	defer stopExact()
	pattern, stopPattern := serveStream(t, h, "match_urlpattern=https://example.com/:a")
	defer stopPattern()

	entered, release := make(chan struct{}), make(chan struct{})
	h.dispatcher.testHookEvaluate = func() {
		close(entered)
		<-release
	}
	published := make(chan error, 1)
	go func() {
		_, err := h.Publish(context.Background(), Update{Topics: []string{"x", "https://example.com/1"}})
		published <- err
	}()
	<-entered
	waitFor(t, "the exact subscriber to get the update while patterns wait", func() bool { n, _ := exact.state(); return n == 1 })
	// A new stream registers while the evaluation is held up.
	_, stopLate := serveStream(t, h, "match_urlpattern=https://example.com/:b/:c")
	close(release)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pattern subscriber to get it", func() bool { n, _ := pattern.state(); return n == 1 })
	stopLate()
}

// deadlineWriter is a ResponseWriter whose writes block until a write
// deadline in the past cuts them, and which records whether the hub held
// one of its locks when the deadline was set: on HTTP/2 that is a message
// to the connection's goroutine, which must never wait on the hub.
type deadlineWriter struct {
	httptest.ResponseRecorder
	h        *Hub
	cut      chan struct{}
	once     sync.Once
	blocked  atomic.Bool // a write is waiting
	underHub atomic.Int32
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.blocked.Store(true)
	<-w.cut
	return 0, errors.New("write deadline exceeded")
}

func (w *deadlineWriter) Flush() {}

func (w *deadlineWriter) SetWriteDeadline(d time.Time) error {
	if d.IsZero() || d.After(time.Now()) {
		return nil
	}
	for _, mu := range []*sync.Mutex{&w.h.mu, &w.h.life} {
		if !mu.TryLock() {
			w.underHub.Add(1)
			continue
		}
		mu.Unlock()
	}
	w.once.Do(func() { close(w.cut) })
	return nil
}

// A stream stuck on a peer that stopped reading is cut, on overflow and
// at shutdown, without a hub-wide lock held.
func TestAbortsHappenOutsideHubLocks(t *testing.T) {
	for _, via := range []string{"overflow", "shutdown"} {
		t.Run(via, func(t *testing.T) {
			h, err := New(WithURL("https://example.com/.well-known/mercure"), WithLimits(Limits{QueueEvents: 1}))
			if err != nil {
				t.Fatal(err)
			}
			w := &deadlineWriter{ResponseRecorder: *httptest.NewRecorder(), h: h, cut: make(chan struct{})}
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, h.Path()+"?match=x", nil))
			}()
			publish := func() {
				t.Helper()
				if _, err := h.Publish(context.Background(), Update{Topics: []string{"x"}}); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "the stream to open", func() bool { return h.Stats().Streams == 1 })
			publish()
			waitFor(t, "the stream to block on its peer", w.blocked.Load)
			if via == "overflow" {
				publish() // queued
				publish() // over QueueEvents: the stream is cut
				waitFor(t, "the stream to be cut", func() bool { return h.Stats().Overflows == 1 })
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := h.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			<-done
			if n := w.underHub.Load(); n != 0 {
				t.Fatalf("a write deadline was set %d times under a hub-wide lock", n)
			}
		})
	}
}
