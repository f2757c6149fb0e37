package mercure

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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

// benchHub is a hub with in-process subscribers: streams registered in the
// index whose "writer" drains the queue without a network, so the figures
// are the hub's own cost of publish → match → authorize → enqueue → dequeue.
type benchHub struct {
	*Hub
	delivered atomic.Int64
	wg        sync.WaitGroup
	stop      chan struct{}
	streams   []*subscriber
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
		bh.wg.Wait()
		for _, s := range bh.streams {
			s.stream.Finish(nil)
		}
		h.Shutdown(context.Background())
	})
	return bh
}

// attach registers an in-process subscriber; with drain, a goroutine
// empties its queue as a stream writer would.
func (bh *benchHub) attach(b *testing.B, drain bool, typ, value string) *subscriber {
	b.Helper()
	s := bh.attachWith(b, nil, typ, value)
	if drain {
		bh.wg.Go(func() {
			var spare []*engine.Event
			for {
				select {
				case <-s.stream.Ready():
					spare = s.stream.Take(spare)
					bh.delivered.Add(int64(len(spare)))
				case <-bh.stop:
					return
				}
			}
		})
	}
	return s
}

// attachWith registers an in-process subscriber holding p's grants.
func (bh *benchHub) attachWith(b *testing.B, p *principal, typ, value string) *subscriber {
	b.Helper()
	m, _, err := bh.newMatcher(typ, value, &bh.cfg.limits.Patterns)
	ms := []matcher{m}
	if err == nil {
		err = bh.compileMatchers(ms, &bh.cfg.limits.Patterns)
	}
	if err != nil {
		b.Fatal(err)
	}
	s := bh.newSubscriber(p, ms)
	if status, msg := bh.open(s); status != 0 {
		b.Fatal(msg)
	}
	bh.streams = append(bh.streams, s)
	return s
}

// newSubscriber returns an unregistered in-process subscriber.
func (bh *benchHub) newSubscriber(p *principal, ms []matcher) *subscriber {
	s := &subscriber{hub: bh.Hub, matchers: ms, principal: p, client: "bench"}
	s.stream, _ = bh.engine.NewStream(discard{}, s, engine.StreamConfig{Client: s.client, Anonymous: p == nil})
	return s
}

// discard is the ResponseWriter of in-process subscribers, never written.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

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
					bh.attach(b, true, MatchExact, "https://example.com/fanout")
				}
				u := Update{Topics: []string{"https://example.com/fanout"}, Data: `{"n":1,"text":"a hundred bytes of JSON payload, roughly what an app sends per update....."}`}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, err := bh.Publish(ctx, u); err != nil {
						b.Fatal(err)
					}
				}
				for bh.delivered.Load() < int64(b.N*n) {
					// wait for the readers to drain the last updates
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
			streams := make([]*subscriber, n)
			for i := range streams {
				streams[i] = bh.attach(b, false, typ, value)
			}
			benchDispatch(b, bh, streams, &store.Event{Topics: []string{"https://example.com/fanout"}, ID: "x"})
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
			streams := make([]*subscriber, n)
			pat, err := bh.compilePattern("https://example.com/fanout{/*}?", &bh.cfg.limits.Patterns)
			if err != nil {
				b.Fatal(err)
			}
			for i := range streams {
				// Each user's own topic plus the shared one: 10 000 distinct sets.
				grants := []matcher{
					{kind: index.Exact, typ: MatchExact, value: fmt.Sprintf("https://example.com/users/%d", i)},
					{kind: index.Exact, typ: MatchExact, value: "https://example.com/fanout"},
				}
				if shared {
					grants = []matcher{{kind: index.URLPattern, typ: MatchURLPattern, value: pat.Raw(), pattern: pat}}
				}
				streams[i] = bh.attachWith(b, &principal{subscribe: newGrantSet(grants)}, MatchExact, "https://example.com/fanout")
			}
			benchDispatch(b, bh, streams, &store.Event{Topics: []string{"https://example.com/fanout"}, ID: "x", Private: true})
		})
	}
}

// benchDispatch dispatches e over and over to streams, emptying their
// queues outside the timer, and reports the cost per delivery.
// Each dispatch goes through the feed and is waited for: a handoff to
// the dispatcher goroutine, a few microseconds against a fan-out's
// hundreds.
func benchDispatch(b *testing.B, bh *benchHub, streams []*subscriber, e *store.Event) {
	spares := make([][]*engine.Event, len(streams))
	ctx := context.Background()
	bytes := appendSSE(nil, e) // encoded once, as the hub does
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		e.Seq = uint64(i + 1)
		bh.engine.Push(redispatched(e, bytes))
		if err := bh.engine.WaitDispatched(ctx); err != nil {
			b.Fatal(err)
		}
		if i%512 == 511 {
			b.StopTimer()
			for i, s := range streams {
				spares[i] = s.stream.Take(spares[i]) // reuse both slices, as a writer does
			}
			b.StartTimer()
		}
	}
	if e.Private && len(streams[len(streams)-1].stream.Take(nil)) == 0 && b.N%512 != 0 {
		b.Fatal("the private update was not delivered")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(streams)), "ns/delivery")
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
						bh.attach(b, true, kind, v)
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
			bh := newBenchHub(b, WithSubscriptions())
			for i := range n {
				s := bh.attach(b, true, MatchExact, fmt.Sprintf("https://example.com/users/%d", i))
				bh.subscriptionsStarted(s)
				<-bh.announceStarted(s)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				m, _, err := bh.newMatcher(MatchExact, "https://example.com/churn", &bh.cfg.limits.Patterns)
				if err != nil {
					b.Fatal(err)
				}
				s := bh.newSubscriber(nil, []matcher{m})
				if status, msg := bh.open(s); status != 0 {
					b.Fatal(msg)
				}
				bh.subscriptionsStarted(s)
				s.started = bh.announceStarted(s)
				s.stream.Finish(nil)
			}
		})
	}
}

// BenchmarkSubscriptionsCollection builds the API's collection of 10 000
// subscriptions: a copy under the registry's lock, sorted, then encoded.
func BenchmarkSubscriptionsCollection(b *testing.B) {
	bh := newBenchHub(b, WithSubscriptions())
	for i := range 10_000 {
		s := bh.attach(b, true, MatchExact, fmt.Sprintf("https://example.com/users/%d", i))
		bh.subscriptionsStarted(s)
		<-bh.announceStarted(s)
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
				bh.attach(b, true, MatchExact, "https://example.com/fanout")
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
				s := bh.newSubscriber(nil, []matcher{m})
				if status, msg := bh.open(s); status != 0 {
					b.Fatal(msg)
				}
				s.stream.Finish(nil)
			}
		})
	}
}
