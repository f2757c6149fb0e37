package mercure

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// MAT-9: URL patterns are evaluated without the hub's lock: while one
// dispatch evaluates them, streams open, and the exact subscribers of the
// update being dispatched already have it.
func TestDispatchEvaluatesPatternsWithoutTheLock(t *testing.T) {
	h, err := New("https://example.com/.well-known/mercure")
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

// A stream stuck on a peer that stopped reading is cut, on overflow and
// at shutdown, without a hub-wide lock held.
func TestAbortsHappenOutsideHubLocks(t *testing.T) {
	for _, via := range []string{"overflow", "shutdown"} {
		t.Run(via, func(t *testing.T) {
			h, err := New("https://example.com/.well-known/mercure", WithLimits(Limits{QueueEvents: 1}))
			if err != nil {
				t.Fatal(err)
			}
			w := newBlockingWriter()
			w.hub = h
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
			waitFor(t, "the stream to block on its peer", w.writing.Load)
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

// blockingWriter is a ResponseWriter whose writes block until a write
// deadline in the past cuts them, like a peer that stopped reading. With
// hub set, it records whether the hub held one of its locks when the
// deadline was set: on HTTP/2 that is a message to the connection's
// goroutine, which must never wait on the hub.
type blockingWriter struct {
	httptest.ResponseRecorder
	hub      *Hub
	release  chan struct{}
	once     sync.Once
	writing  atomic.Bool // a write is waiting
	underHub atomic.Int32
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{ResponseRecorder: *httptest.NewRecorder(), release: make(chan struct{})}
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	w.writing.Store(true)
	<-w.release
	return 0, errors.New("write deadline exceeded")
}

func (w *blockingWriter) Flush() {}

func (w *blockingWriter) SetWriteDeadline(d time.Time) error {
	if d.IsZero() || d.After(time.Now()) {
		return nil
	}
	if w.hub != nil {
		for _, mu := range []*sync.Mutex{&w.hub.mu, &w.hub.life} {
			if !mu.TryLock() {
				w.underHub.Add(1)
				continue
			}
			mu.Unlock()
		}
	}
	w.once.Do(func() { close(w.release) })
	return nil
}

// Limits.MaxQueuedBytes: when the queues together reach it, a stream with
// events already waiting is dropped rather than given more; a stream with
// none still gets one.
func TestMaxQueuedBytes(t *testing.T) {
	h, err := New("https://example.com/.well-known/mercure",
		WithLimits(Limits{MaxBodyBytes: 1000, QueueBytes: 1000, MaxQueuedBytes: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	var writers []*blockingWriter
	for range 2 {
		w := newBlockingWriter()
		writers = append(writers, w)
		go h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, h.Path()+"?match=x", nil))
	}
	waitFor(t, "the streams to open", func() bool { return h.Stats().Streams == 2 })
	publish := func() {
		t.Helper()
		if _, err := h.Publish(context.Background(), Update{Topics: []string{"x"}, Data: strings.Repeat("d", 250)}); err != nil {
			t.Fatal(err)
		}
		if err := h.waitDispatched(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	publish() // taken by both writers, which block on it
	for _, w := range writers {
		waitFor(t, "a writer to block", w.writing.Load)
	}
	publish() // into two empty queues: about 2 × 270 bytes queued
	if st := h.Stats(); st.Overflows != 0 || st.QueuedBytes < 500 {
		t.Fatalf("after the second update: %+v", st)
	}
	publish() // the first queue takes it (about 810); the second would pass 1000
	if st := h.Stats(); st.Overflows != 1 {
		t.Fatalf("after the third update: %+v, want one stream dropped", st)
	}
}

// heldReplayStore is a store whose replays wait until their context ends.
type heldReplayStore struct {
	*MemoryStore
	replaying atomic.Int32
}

func (s *heldReplayStore) Replay(ctx context.Context, id string) (Backlog, error) {
	b, err := s.MemoryStore.Replay(ctx, id)
	events := b.Events
	b.Events = func(yield func(*Event, error) bool) {
		s.replaying.Add(1)
		defer s.replaying.Add(-1)
		for e, err := range events {
			if !yield(e, err) {
				return
			}
		}
		<-ctx.Done()
		yield(nil, ctx.Err())
	}
	return b, err
}

// Limits.MaxReplays and ReplayTimeout: replays beyond the cap wait, then
// get 503 with Retry-After; a replay that outlasts its time ends its
// stream, and frees its slot.
func TestReplaySlotsAndTimeout(t *testing.T) {
	defer func(d time.Duration) { replayWait = d }(replayWait)
	replayWait = 50 * time.Millisecond
	ms, err := NewMemoryStore(10)
	if err != nil {
		t.Fatal(err)
	}
	store := &heldReplayStore{MemoryStore: ms}
	h, err := New("https://example.com/.well-known/mercure", WithStore(store),
		WithLimits(Limits{MaxReplays: 1, ReplayTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	replay := func() (*httptest.ResponseRecorder, chan struct{}) {
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			r := httptest.NewRequest(http.MethodGet, h.Path()+"?match=x", nil)
			r.Header.Set("Last-Event-ID", Earliest)
			h.ServeHTTP(w, r)
		}()
		return w, done
	}
	_, first := replay()
	waitFor(t, "the first replay", func() bool { return store.replaying.Load() == 1 })
	w, second := replay()
	<-second
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a replay over MaxReplays: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	<-first // ended by ReplayTimeout
	_, third := replay()
	waitFor(t, "a replay in the freed slot", func() bool { return store.replaying.Load() == 1 })
	<-third
}

// openStream runs a stream of h for query on a flushCounter until the
// returned func is called (the hub stays up).
func openStream(t *testing.T, h *Hub, query string) (*flushCounter, func()) {
	t.Helper()
	w := &flushCounter{header: http.Header{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, h.Path()+"?"+query, nil))
	}()
	waitFor(t, "the stream to start", func() bool { _, f := w.state(); return f == 1 })
	return w, func() { cancel(); <-done }
}

// holdDispatch makes h's dispatcher stop after its next look-up until
// the returned release is called; held is closed once it stops there.
func holdDispatch(h *Hub) (held <-chan struct{}, release func()) {
	stopped, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.dispatcher.testHookDispatch = func() {
		once.Do(func() {
			close(stopped)
			<-resume
		})
	}
	var released sync.Once
	return stopped, func() { released.Do(func() { close(resume) }) }
}

// publishSoon publishes u and fails the test if Publish has not returned
// within a few seconds: Publish records; it must not wait for the fan-out.
func publishSoon(t *testing.T, h *Hub, u Update) string {
	t.Helper()
	type result struct {
		id  string
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := h.Publish(context.Background(), u)
		done <- result{id, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.id
	case <-time.After(5 * time.Second):
		t.Fatal("Publish waited for the dispatch in progress")
		return ""
	}
}

// Publishing records and answers; the fan-out happens after. While a
// dispatch is held in the middle, publishes return, streams open and
// close (registration does not wait for it), and afterwards each stream
// has exactly what it should: the held update and the next for the one
// that was open, only the next for the one that opened meanwhile
// (recorded before it opened, the held update is not live for it), and
// nothing queued for the one that closed.
func TestPublishDoesNotWaitForFanOut(t *testing.T) {
	h, err := New("https://example.com/.well-known/mercure")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	before, stopBefore := openStream(t, h, "match=x")
	defer stopBefore()
	leaving, stopLeaving := openStream(t, h, "match=x")

	held, release := holdDispatch(h)
	defer release()
	publishSoon(t, h, Update{Topics: []string{"x"}, Data: "first"})
	<-held
	// The dispatch of "first" has looked the index up and waits.
	during, stopDuring := openStream(t, h, "match=x")
	defer stopDuring()
	stopLeaving()
	publishSoon(t, h, Update{Topics: []string{"x"}, Data: "second"})
	if n, _ := before.state(); n != 0 {
		t.Fatalf("%d events delivered while the dispatch was held", n)
	}
	release()
	waitFor(t, "both updates to reach the first stream", func() bool { n, _ := before.state(); return n == 2 })
	waitFor(t, "the second update to reach the stream opened meanwhile", func() bool { n, _ := during.state(); return n == 1 })
	if err := h.waitDispatched(context.Background()); err != nil {
		t.Fatal(err)
	}
	before.mu.Lock()
	got := before.body.String()
	before.mu.Unlock()
	if i, j := strings.Index(got, "data: first"), strings.Index(got, "data: second"); i < 0 || j < i {
		t.Fatalf("the first stream got %q: want first, then second", got)
	}
	during.mu.Lock()
	got = during.body.String()
	during.mu.Unlock()
	if strings.Contains(got, "first") {
		t.Fatalf("the stream opened after the first update was recorded got it live: %q", got)
	}
	if n, _ := leaving.state(); n != 0 {
		t.Fatalf("the stream closed during the dispatch got %d events", n)
	}
	waitFor(t, "the queues to empty", func() bool { return h.Stats().QueuedBytes == 0 })
}

// Limits.MaxPendingUpdates: a hub that cannot keep up holds publishers
// back rather than pile updates up; a publisher that gives up records
// nothing; the others go through once the dispatcher catches up. A POST
// gets 503 after publishWait.
func TestPendingUpdatesHoldPublishersBack(t *testing.T) {
	h, err := New("https://example.com/.well-known/mercure", WithInsecurePublishing(), WithLimits(Limits{MaxPendingUpdates: 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	held, release := holdDispatch(h)
	defer release()
	// With no stream, the index look-up still happens: the hook holds.
	publishSoon(t, h, Update{Topics: []string{"x"}, ID: "1"})
	<-held
	publishSoon(t, h, Update{Topics: []string{"x"}, ID: "2"})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := h.Publish(ctx, Update{Topics: []string{"x"}, ID: "3"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish over the backlog: %v, want the context's deadline", err)
	}
	if got := h.LastEventID(); got != "2" {
		t.Fatalf("LastEventID %q: the refused update was recorded", got)
	}

	defer func(w time.Duration) { publishWait = w }(publishWait)
	publishWait = 50 * time.Millisecond
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, h.Path(), strings.NewReader("topic=x&id=http"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("POST over the backlog: %d %q, want 503 with Retry-After", rec.Code, rec.Header())
	}

	published := make(chan error, 1)
	go func() {
		_, err := h.Publish(context.Background(), Update{Topics: []string{"x"}, ID: "4"})
		published <- err
	}()
	select {
	case err := <-published:
		t.Fatalf("Publish returned (%v) while the backlog was full", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if got := h.LastEventID(); got != "4" {
		t.Fatalf("LastEventID %q, want 4", got)
	}
}
