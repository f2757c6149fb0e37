package mercure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/memring"
)

// benchHub is a hub with in-process subscribers: streams served by the
// hub's own path (serveStream), written by their goroutines to a
// connection-less writer that counts the events, so the figures are the
// hub's own cost of publish → match → authorize → enqueue → write.
type benchHub struct {
	*Hub
	delivered atomic.Int64
	wg        sync.WaitGroup
	stop      chan struct{}
}

func newBenchHub(b *testing.B, opts ...Option) *benchHub {
	b.Helper()
	h, err := New("https://example.com/.well-known/mercure", append([]Option{WithStore(memring.New(memring.Config{}))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	bh := &benchHub{Hub: h, stop: make(chan struct{})}
	b.Cleanup(func() {
		close(bh.stop)
		h.Shutdown(context.Background())
		bh.wg.Wait()
	})
	return bh
}

// attach serves an in-process subscriber of one matcher, until the
// benchmark ends.
func (bh *benchHub) attach(b *testing.B, typ, value string) *subscriber {
	b.Helper()
	s := bh.newSubscriber(b, nil, typ, value)
	stop := bh.serve(b, s, nil)
	bh.wg.Go(func() {
		<-bh.stop
		stop()
	})
	return s
}

// park registers an in-process subscriber holding p's grants whose
// writer stays parked in its first write until the benchmark ends: its
// events only queue up, so that what is measured is the dispatch alone
// (match, authorize, enqueue, and a wake-up nobody waits for).
func (bh *benchHub) park(b *testing.B, p *principal, typ, value string) {
	b.Helper()
	s := bh.newSubscriber(b, p, typ, value)
	parked := make(chan struct{})
	n := bh.engine.Streams()
	stop := bh.serve(b, s, parked)
	for bh.engine.Streams() == n {
		runtime.Gosched() // registered: the engine holds it
	}
	bh.wg.Go(func() {
		<-bh.stop
		close(parked)
		stop()
	})
}

// newSubscriber returns an in-process subscriber of one matcher, not
// served yet.
func (bh *benchHub) newSubscriber(b *testing.B, p *principal, typ, value string) *subscriber {
	b.Helper()
	m, _, err := bh.newMatcher(typ, value, &bh.cfg.limits.Patterns)
	ms := []matcher{m}
	if err == nil {
		err = bh.compileMatchers(ms, &bh.cfg.limits.Patterns)
	}
	if err != nil {
		b.Fatal(err)
	}
	return &subscriber{hub: bh.Hub, matchers: ms, principal: p, client: "bench"}
}

// serve serves s as the subscribe endpoint does, and returns once its
// headers are flushed (unless its writes are parked until parked is
// closed); stop ends it and waits for its end.
func (bh *benchHub) serve(b *testing.B, s *subscriber, parked chan struct{}) (stop func()) {
	b.Helper()
	w := &countingWriter{delivered: &bh.delivered, flushed: make(chan struct{}), parked: parked}
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, bh.Path(), nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rw := &refusalWriter{ResponseWriter: w, subscribe: true}
		bh.serveStream(ctx, w, rw, r, s, subscribeRequest{}, &setupSpan{span: noSpan, rw: rw})
	}()
	if parked == nil {
		select {
		case <-w.flushed:
		case <-done:
			b.Fatal("the stream was refused")
		}
	}
	return func() { cancel(); <-done }
}

// countingWriter is the connection-less ResponseWriter of in-process
// subscribers: it counts the events written to it.
type countingWriter struct {
	header    http.Header
	delivered *atomic.Int64
	flushed   chan struct{} // closed at the first flush: the stream is set up
	once      sync.Once
	parked    chan struct{} // when not nil, writes wait for it to close, then fail
}

func (w *countingWriter) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.parked != nil {
		<-w.parked
		return 0, errors.New("parked")
	}
	if bytes.Contains(b, []byte("\ndata:")) {
		w.delivered.Add(1)
	}
	return len(b), nil
}

func (w *countingWriter) WriteHeader(int)                  {}
func (w *countingWriter) SetWriteDeadline(time.Time) error { return nil }
func (w *countingWriter) Flush()                           { w.once.Do(func() { close(w.flushed) }) }

// BenchmarkPublishDeliver publishes on one topic that every subscriber
// matches, and waits until each update reached every queue's reader.
// With observed=on, spans are recorded (an SDK provider sampling every
// span, exporting none) and the metrics are read every 100 ms, ten times
// as often as a Prometheus scrape: the cost of operations on the hot
// path, in-process, where nothing else dilutes it.
func BenchmarkPublishDeliver(b *testing.B) {
	for _, observed := range []bool{false, true} {
		for _, n := range []int{1, 1000, 10_000} {
			name := fmt.Sprintf("observed=%v/subs=%d", observed, n)
			b.Run(name, func(b *testing.B) {
				opts := []Option{WithLimits(Limits{QueueEvents: 1 << 20})}
				if observed {
					tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
					b.Cleanup(func() { tp.Shutdown(context.Background()) })
					opts = append(opts, WithTracerProvider(tp))
				}
				bh := newBenchHub(b, opts...)
				if observed {
					scrape := time.NewTicker(100 * time.Millisecond)
					bh.wg.Go(func() {
						defer scrape.Stop()
						for {
							select {
							case <-scrape.C:
								bh.Metrics()
							case <-bh.stop:
								return
							}
						}
					})
				}
				for range n {
					bh.attach(b, MatchExact, "https://example.com/fanout")
				}
				u := Update{Topics: []string{"https://example.com/fanout"}, Data: `{"n":1,"text":"a hundred bytes of JSON payload, roughly what an app sends per update....."}`}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N { // not b.Loop, which stops the timer before the wait below
					if _, err := bh.Publish(ctx, u); err != nil {
						b.Fatal(err)
					}
				}
				for bh.delivered.Load() < int64(b.N*n) {
					runtime.Gosched() // the writers write the last updates
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
			})
		}
	}
}

// BenchmarkDispatchMatched measures matching plus enqueue per matched
// subscriber, without publishing overhead: one pre-built event dispatched
// to n subscribers whose queues are emptied outside the timer.
func BenchmarkDispatchMatched(b *testing.B) {
	for _, kind := range []string{MatchExact, MatchURLPattern, "wildcard"} {
		b.Run(kind, func(b *testing.B) {
			const n = 10_000
			bh := newBenchHub(b, WithLimits(Limits{QueueEvents: 1 << 20}))
			value := map[string]string{MatchExact: "https://example.com/fanout", MatchURLPattern: "https://example.com/:t", "wildcard": "*"}[kind]
			typ := kind
			if kind == "wildcard" {
				typ = MatchExact
			}
			for range n {
				bh.park(b, nil, typ, value)
			}
			benchDispatch(b, bh, n, &store.Event{Topics: []string{"https://example.com/fanout"}, ID: "x"})
		})
	}
}

// BenchmarkDispatchPrivate dispatches one private update to 10 000
// subscribers holding subscribe grants: all the same URL pattern grant
// (one interned set, evaluated once per update), or each its own exact
// grant (10 000 sets, each evaluated once).
func BenchmarkDispatchPrivate(b *testing.B) {
	for _, shared := range []bool{true, false} {
		name := "distinct-exact-grants"
		if shared {
			name = "shared-urlpattern-grant"
		}
		b.Run(name, func(b *testing.B) {
			const n = 10_000
			bh := newBenchHub(b, WithLimits(Limits{QueueEvents: 1 << 20}))

			pat, err := bh.compilePattern("https://example.com/fanout{/*}?", &bh.cfg.limits.Patterns)
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				// Each user's own topic plus the shared one: 10 000 distinct sets.
				grants := []matcher{
					{kind: index.Exact, typ: MatchExact, value: fmt.Sprintf("https://example.com/users/%d", i)},
					{kind: index.Exact, typ: MatchExact, value: "https://example.com/fanout"},
				}
				if shared {
					grants = []matcher{{kind: index.URLPattern, typ: MatchURLPattern, value: pat.Raw(), pattern: pat}}
				}
				bh.park(b, &principal{subscribe: newGrantSet(grants)}, MatchExact, "https://example.com/fanout")
			}
			benchDispatch(b, bh, n, &store.Event{Topics: []string{"https://example.com/fanout"}, ID: "x", Private: true})
		})
	}
}

// benchDispatch dispatches e over and over to n parked streams (see
// park), and reports the cost per delivery. Each dispatch goes through the
// feed and is waited for: a handoff to the dispatcher goroutine, a few
// microseconds against a fan-out's hundreds.
func benchDispatch(b *testing.B, bh *benchHub, n int, e *store.Event) {
	ctx := context.Background()
	bytes := appendSSE(nil, e) // encoded once, as the hub does
	before := bh.engine.Counters().Deliveries.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		e.Seq = uint64(i + 1)
		bh.engine.Push(redispatched(e, bytes))
		if err := bh.engine.WaitDispatched(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if got := bh.engine.Counters().Deliveries.Load() - before; got != uint64(b.N*n) {
		b.Fatalf("%d deliveries of %d updates to %d streams", got, b.N, n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
}

// BenchmarkSelective has n subscribers on n distinct topics. "hit" publishes
// on a subscriber's topic (one delivery); "miss" on a topic nobody matches,
// whose cost must not grow with n.
func BenchmarkSelective(b *testing.B) {
	for _, kind := range []string{MatchExact, MatchURLPattern} {
		for _, n := range []int{10, 10_000} {
			for _, hit := range []bool{true, false} {
				name := fmt.Sprintf("%s/subs=%d/miss", kind, n)
				if hit {
					name = fmt.Sprintf("%s/subs=%d/hit", kind, n)
				}
				b.Run(name, func(b *testing.B) {
					bh := newBenchHub(b)
					for i := range n {
						v := fmt.Sprintf("https://example.com/sel/%d", i)
						if kind == MatchURLPattern {
							v += "/:n"
						}
						bh.attach(b, kind, v)
					}
					topics := make([]string, 4096)
					for i := range topics {
						switch {
						case !hit:
							topics[i] = fmt.Sprintf("https://example.com/nobody/%d", i)
						case kind == MatchExact:
							topics[i] = fmt.Sprintf("https://example.com/sel/%d", i%n)
						default: // a topic never seen before: no cache can help
							topics[i] = fmt.Sprintf("https://example.com/sel/%d/%d", i%n, i)
						}
					}
					ctx := context.Background()
					u := Update{Data: "x"}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; b.Loop(); i++ {
						u.Topics = topics[i%len(topics) : i%len(topics)+1]
						if _, err := bh.Publish(ctx, u); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// redispatched returns a new view of e, the event encoded as bytes, for
// the engine to dispatch again: what the store's feed hands the hub.
func redispatched(e *store.Event, bytes []byte) *engine.Event {
	return &engine.Event{Seq: e.Seq, ID: e.ID, Topics: e.Topics, Private: e.Private, Time: e.Time, Bytes: bytes}
}

// BenchmarkEncodeEvent is the one-time SSE encoding of an update.
func BenchmarkEncodeEvent(b *testing.B) {
	e := &store.Event{
		ID:     "urn:uuid:0b5b6f9e-3c51-4f4a-9d3e-5a1d2c7e8f90",
		Topics: []string{"https://example.com/books/1"},
		Data:   "{\"title\":\"Dune\",\n\"author\":\"Frank Herbert\",\n\"status\":\"checked out\"}",
	}
	b.ReportAllocs()
	for b.Loop() {
		appendSSE(nil, e)
	}
}

// BenchmarkSubscriptionChurn connects and disconnects one stream while
// 10 000 subscriptions are active: registering it, recording its
// subscription and publishing the start event, then the reverse. The cost
// must not grow with the number of subscriptions.
func BenchmarkSubscriptionChurn(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			bh := newBenchHub(b, WithSubscriptions(), WithLimits(Limits{MaxConnections: n + 1}))
			for i := range n {
				bh.attach(b, MatchExact, fmt.Sprintf("https://example.com/users/%d", i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				m, _, err := bh.newMatcher(MatchExact, "https://example.com/churn", &bh.cfg.limits.Patterns)
				if err != nil {
					b.Fatal(err)
				}
				s := &subscriber{hub: bh.Hub, matchers: []matcher{m}, client: "bench"}
				bh.serve(b, s, nil)() // subscriptions recorded and announced, then ended
			}
		})
	}
}

// BenchmarkSubscriptionsCollection builds the API's collection of 10 000
// subscriptions: a copy under the registry's lock, sorted, then encoded.
func BenchmarkSubscriptionsCollection(b *testing.B) {
	bh := newBenchHub(b, WithSubscriptions())
	for i := range 10_000 {
		bh.attach(b, MatchExact, fmt.Sprintf("https://example.com/users/%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		subs, err := bh.Subscriptions(context.Background())
		if err != nil || len(subs) != 10_000 {
			b.Fatal(err, len(subs))
		}
		if _, err := json.Marshal(subs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegisterDuringFanOut opens and closes one stream while the
// dispatcher fans updates out to 10 000 others without pause: a
// registration holds the hub's lock only against the index look-up, not
// against the deliveries, so its cost must not grow with the fan-out.
func BenchmarkRegisterDuringFanOut(b *testing.B) {
	for _, n := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			bh := newBenchHub(b, WithLimits(Limits{QueueEvents: 1 << 20, MaxConnections: n + 1}))
			for range n {
				bh.attach(b, MatchExact, "https://example.com/fanout")
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			b.Cleanup(func() { close(stop); wg.Wait() })
			wg.Go(func() {
				e := &store.Event{Topics: []string{"https://example.com/fanout"}, ID: "x"}
				bytes := appendSSE(nil, e)
				for seq := uint64(1); ; seq++ {
					select {
					case <-stop:
						return
					default:
					}
					e.Seq = seq
					bh.engine.Push(redispatched(e, bytes))
					if err := bh.engine.WaitDispatched(context.Background()); err != nil {
						return
					}
				}
			})
			m, _, err := bh.newMatcher(MatchExact, "https://example.com/fanout", &bh.cfg.limits.Patterns)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s := &subscriber{hub: bh.Hub, matchers: []matcher{m}, client: "bench"}
				bh.serve(b, s, nil)()
			}
		})
	}
}
