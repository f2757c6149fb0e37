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
	"testing/synctest"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/memring"
	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/store"
)

// blockingWriter is a ResponseWriter whose writes block until a write
// deadline in the past cuts them, like a peer that stopped reading.
type blockingWriter struct {
	httptest.ResponseRecorder
	release chan struct{}
	once    sync.Once
	writing atomic.Bool // a write is waiting
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
	w.once.Do(func() { close(w.release) })
	return nil
}

// Limits.MaxQueuedBytes counts what the queues hold as the memory it
// takes: an event's bytes once however many queues share it, and a few
// words per queued entry. Past the budget, this hub's publishers wait
// for room, and the streams that made no progress for a quarter of the
// write timeout are ended, those that hold the most first; a stream that keeps up is never
// ended for the budget, and gets every update.
func TestMaxQueuedBytes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, err := New("https://example.com/.well-known/mercure",
			WithLimits(Limits{MaxBodyBytes: 4 << 10, QueueBytes: 64 << 10, MaxQueuedBytes: 64 << 10}))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Shutdown(context.Background())
		var stalled []*blockingWriter
		for range 2 {
			w := newBlockingWriter()
			stalled = append(stalled, w)
			go h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, h.Path()+"?match=x", nil))
		}
		healthy, stop := openStream(t, h, "match=x")
		defer stop()
		synctest.Wait()
		data := strings.Repeat("d", 1000)
		publish := func(ctx context.Context) error {
			_, err := h.Publish(ctx, Update{Topics: []string{"x"}, Data: data})
			synctest.Wait()
			return err
		}
		if err := publish(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, w := range stalled {
			if !w.writing.Load() {
				t.Fatal("a stalled stream is not blocked on its write")
			}
		}
		// One event held by two queues counts once.
		if q := h.Metrics().QueuedBytes; q < 1000 || q > 1200 {
			t.Fatalf("%d bytes queued for one 1 KB event held by two stalled streams, want it counted once", q)
		}
		// About 60 fill the budget, before either stalled stream reaches
		// its own limit (64 KiB of events): then publishers wait for room.
		n := 1
		for ; h.Metrics().QueuedBytes <= 64<<10; n++ {
			if err := publish(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if st := h.Metrics(); st.Overflows != 0 || st.Streams != 3 {
			t.Fatalf("%+v after %d updates: a stream ended before the budget was reached", st, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := publish(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Publish past the budget: %v, want it to wait for room", err)
		}
		// A quarter of the write timeout with no progress: the stalled
		// streams are ended, and the publisher gets its room.
		if err := publish(context.Background()); err != nil {
			t.Fatal(err)
		}
		n++
		st := h.Metrics()
		if st.Overflows != 2 || st.StreamsClosed[CloseQueueOverflow] != 2 {
			t.Fatalf("overflows %d, closed for overflow %d: want the two stalled streams ended", st.Overflows, st.StreamsClosed[CloseQueueOverflow])
		}
		if got, _ := healthy.state(); got != n {
			t.Fatalf("the healthy stream got %d updates of %d", got, n)
		}
		if q := h.Metrics().QueuedBytes; q != 0 {
			t.Fatalf("%d bytes still queued", q)
		}
	})
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
	testwait.For(t, "the stream to start", func() bool { _, f := w.state(); return f == 1 })
	return w, func() { cancel(); <-done }
}

// heldReplayStore is a store whose replays wait until their context ends.
type heldReplayStore struct {
	*memring.Ring
	replaying atomic.Int32
}

func (s *heldReplayStore) Replay(ctx context.Context, id string) (store.Backlog, error) {
	b, err := s.Ring.Replay(ctx, id)
	events := b.Events
	b.Events = func(yield func(*store.Event, error) bool) {
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

// Limits.MaxReplays and ReplayTimeout: replays beyond the cap wait
// replayWait for a slot, then get 503 with Retry-After; a replay that
// outlasts its time ends its stream, and frees its slot. The test runs in
// a synctest bubble: the waits pass on its clock.
func TestReplaySlotsAndTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &heldReplayStore{Ring: newRing(10)}
		timeout := 2 * replayWait // the first replay holds its slot past the second's wait
		h, err := New("https://example.com/.well-known/mercure", WithStore(st),
			WithLimits(Limits{MaxReplays: 1, ReplayTimeout: timeout}))
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
				r.Header.Set("Last-Event-ID", store.Earliest)
				h.ServeHTTP(w, r)
			}()
			return w, done
		}
		_, first := replay()
		synctest.Wait()
		if n := st.replaying.Load(); n != 1 {
			t.Fatalf("%d replays running, want the first", n)
		}
		w, second := replay()
		time.Sleep(replayWait - time.Nanosecond)
		synctest.Wait()
		select {
		case <-second:
			t.Fatalf("a replay over MaxReplays was answered (%d) before waiting for a slot", w.Code)
		default:
		}
		<-second
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("a replay over MaxReplays: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
		}
		<-first // ended by ReplayTimeout
		_, third := replay()
		synctest.Wait()
		if n := st.replaying.Load(); n != 1 {
			t.Fatalf("%d replays running, want one in the freed slot", n)
		}
		<-third
	})
}

// holdDispatch registers a stream on topic that holds h's dispatcher at
// the first private update it is offered, after the index look-up, until
// release is called; held is closed once it holds.
func holdDispatch(t *testing.T, h *Hub, topic string) (held <-chan struct{}, release func()) {
	t.Helper()
	o := &holder{held: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	opened, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- h.engine.Serve(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), engine.Spec{
			Owner: o, Client: "holder", Matchers: []engine.Matcher{{Kind: index.Exact, Value: topic}},
			Opened: func(*engine.Stream) { close(opened) },
		})
	}()
	select {
	case <-opened:
	case err := <-done:
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { close(o.release) }) }
	t.Cleanup(func() { release(); cancel(); <-done })
	return o.held, release
}

// holder is the owner of holdDispatch's stream.
type holder struct {
	once          sync.Once
	held, release chan struct{}
}

func (o *holder) ReadsPrivate(*engine.Event) bool {
	o.once.Do(func() { close(o.held) })
	<-o.release
	return false
}

func (o *holder) Ended() func() { return nil }

// Limits.MaxPendingUpdates: a hub that cannot keep up holds publishers
// back rather than pile updates up; a publisher that gives up records
// nothing; the others go through once the dispatcher catches up. A POST
// gets 503 after publishWait, which passes on the synctest bubble's clock.
func TestPendingUpdatesHoldPublishersBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, err := New("https://example.com/.well-known/mercure", WithInsecurePublishing(), WithLimits(Limits{MaxPendingUpdates: 2}),
			WithIssuer(Issuer{ID: "https://example.com", SubscriberKeys: hmacKeys(t)}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Shutdown(context.Background()) }) // after holdDispatch's
		held, release := holdDispatch(t, h, "x")
		defer release()
		if _, err := h.Publish(context.Background(), Update{Topics: []string{"x"}, ID: "1", Private: true}); err != nil {
			t.Fatal(err)
		}
		<-held
		if _, err := h.Publish(context.Background(), Update{Topics: []string{"x"}, ID: "2"}); err != nil {
			t.Fatal(err)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := h.Publish(ctx, Update{Topics: []string{"x"}, ID: "3"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Publish over the backlog: %v, want the context's deadline", err)
		}
		if got := h.LastEventID(); got != "2" {
			t.Fatalf("LastEventID %q: the refused update was recorded", got)
		}

		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, h.Path(), strings.NewReader("topic=x&id=http"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		posted := make(chan struct{})
		go func() {
			defer close(posted)
			h.ServeHTTP(rec, req)
		}()
		time.Sleep(publishWait - time.Nanosecond)
		synctest.Wait()
		select {
		case <-posted:
			t.Fatalf("POST over the backlog answered (%d) before waiting for room", rec.Code)
		default:
		}
		<-posted
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("POST over the backlog: %d %q, want 503 with Retry-After", rec.Code, rec.Header())
		}

		published := make(chan error, 1)
		go func() {
			_, err := h.Publish(context.Background(), Update{Topics: []string{"x"}, ID: "4"})
			published <- err
		}()
		synctest.Wait()
		select {
		case err := <-published:
			t.Fatalf("Publish returned (%v) while the backlog was full", err)
		default:
		}
		release()
		if err := <-published; err != nil {
			t.Fatal(err)
		}
		if got := h.LastEventID(); got != "4" {
			t.Fatalf("LastEventID %q, want 4", got)
		}
	})
}

// hmacKeys is a key set that verifies tokens signed with an HMAC secret.
func hmacKeys(t *testing.T) jwk.Set {
	t.Helper()
	keys, err := Keys(HMACSecret("an HMAC secret of at least 32 bytes!"))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
