package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/sse"
	"github.com/mercurekit/mercure/internal/topicurl"
)

const hubURL = "https://example.com/.well-known/mercure"

// testConfig is a configuration with the hub's default limits.
func testConfig(t testing.TB) Config {
	t.Helper()
	r, err := topicurl.New(hubURL)
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Log:      slog.New(slog.DiscardHandler),
		Resolver: r,
		Limits: Limits{
			QueueEvents: 1024, QueueBytes: 8 << 20, MaxQueuedBytes: 128 << 20, MaxPendingUpdates: 1024,
			MaxPatternsPerPrefix: 64, MaxPatternsPerTopic: 128, MaxTotalPatternSize: 1 << 24,
		},
		KeepAlive:    15 * time.Second,
		WriteTimeout: 15 * time.Second,
	}
}

// newEngine returns an engine configured by testConfig then edit, stopped
// and waited for when the test ends.
func newEngine(t testing.TB, edit func(*Config)) *Engine {
	t.Helper()
	cfg := testConfig(t)
	if edit != nil {
		edit(&cfg)
	}
	e := New(cfg)
	t.Cleanup(func() {
		e.Stop()
		if err := e.Wait(context.Background()); err != nil {
			t.Error(err)
		}
		if err := e.WaitDispatched(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

// owner is a Subscriber that reads every private event, holding the
// dispatcher in ReadsPrivate while hold is set.
type owner struct {
	hold  atomic.Pointer[chan struct{}] // closed to release
	held  chan struct{}                 // closed once the dispatcher is held
	once  sync.Once
	ended atomic.Int32
}

func (o *owner) ReadsPrivate(*Event) bool {
	if h := o.hold.Load(); h != nil {
		o.once.Do(func() { close(o.held) })
		<-*h
	}
	return true
}

func (o *owner) Ended() func() {
	o.ended.Add(1)
	return nil
}

// holding returns an owner that holds the dispatcher at its first
// private event until release.
func holding() (o *owner, release func()) {
	o = &owner{held: make(chan struct{})}
	ch := make(chan struct{})
	o.hold.Store(&ch)
	var once sync.Once
	return o, func() { once.Do(func() { close(ch) }) }
}

// recorder is a ResponseWriter that records what a stream writes and how
// many times it flushes.
type recorder struct {
	header  http.Header
	mu      sync.Mutex
	body    strings.Builder
	flushes int
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (f *recorder) Header() http.Header { return f.header }
func (f *recorder) WriteHeader(int)     {}
func (f *recorder) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.body.Write(b)
}
func (f *recorder) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes++
}

// reset forgets what was written and flushed.
func (f *recorder) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.body.Reset()
	f.flushes = 0
}

// state returns the events written (blank lines) and the flushes.
func (f *recorder) state() (events, flushes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Count(f.body.String(), "\n\n"), f.flushes
}

func (f *recorder) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.body.String()
}

// exact and pattern are matchers.
func exact(topic string) Matcher { return Matcher{Kind: index.Exact, Value: topic} }

func pattern(t testing.TB, raw string) Matcher {
	t.Helper()
	r, err := topicurl.New(hubURL)
	if err != nil {
		t.Fatal(err)
	}
	c := index.NewCache(hubURL, r, 1<<16)
	p, err := c.Get(raw, index.Limit{Groups: 64, Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return Matcher{Kind: index.URLPattern, Value: raw, Pattern: p}
}

// serve opens a stream of o with ms, written to a recorder by its own
// goroutine, until stop. o may be nil.
func serve(t testing.TB, e *Engine, o Subscriber, ms ...Matcher) (w *recorder, stop func()) {
	t.Helper()
	w = newRecorder()
	w, stop, err := serveErr(e, w, o, ms...)
	if err != nil {
		t.Fatal(err)
	}
	return w, stop
}

// serveErr is serve that returns the engine's refusal. It returns once
// the stream is registered and, written to a recorder, once its position
// block is written: what the recorder holds after it is what the stream
// got live. (A writer that blocks holds the stream in its position block.)
func serveErr(e *Engine, w http.ResponseWriter, o Subscriber, ms ...Matcher) (*recorder, func(), error) {
	if o == nil {
		o = &owner{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	opened, started, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- e.Serve(w, r, Spec{Owner: o, Client: "client", Matchers: ms,
			Opened: func(*Stream) { close(opened) }, Started: func() { close(started) }})
	}()
	rec, _ := w.(*recorder)
	steps := []chan struct{}{opened, started}
	if rec == nil {
		steps = steps[:1]
	}
	for _, step := range steps {
		select {
		case <-step:
		case err := <-done:
			cancel()
			if err == nil {
				err = errors.New("the stream ended before it started")
			}
			return nil, nil, err
		}
	}
	if rec != nil {
		rec.reset() // the position block
	}
	return rec, func() { cancel(); <-done }, nil
}

// feeder pushes events with increasing sequence numbers.
type feeder struct {
	e   *Engine
	seq uint64
}

// push pushes an event with data on topics, as the store's feed does
// with another hub's update.
func (f *feeder) push(private bool, data string, topics ...string) *Event {
	f.seq++
	ev := &Event{Seq: f.seq, ID: fmt.Sprint("e", f.seq), Topics: topics, Private: private, Time: time.Now()}
	ev.Bytes = sse.AppendEvent(nil, ev.ID, "", -1, data)
	f.e.Push(ev)
	return ev
}

// publish pushes an event as this hub's own update: the store's feed
// brings it (as the memory store does, within Append), then the
// publisher learns it is recorded.
func (f *feeder) publish(private bool, data string, topics ...string) *Event {
	ev := f.push(private, data, topics...)
	f.e.Published(ev.Seq, ev.ID, ev.Topics, len(ev.Bytes))
	return ev
}
