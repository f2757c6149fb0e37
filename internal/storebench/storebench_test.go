//go:build storebench

package storebench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/boltstore"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/pgstore/pgtest"
	"github.com/mercurekit/mercure/redisstore"
)

const (
	hubURL = "http://example.com/.well-known/mercure"
	// topic is the topic of every update; in BenchmarkPublish nobody
	// subscribes to it.
	topic = "http://example.com/bench/1"
	// retained is the history every store keeps: the memory store's
	// default (memstore.DefaultMaxEvents), boltstore.WithMaxEvents and
	// redisstore.WithMaxLen (approximate trimming), so that the three
	// stores do comparable work per append, pruning included.
	retained = memstore.DefaultMaxEvents
	// payload is about what an application sends per update.
	payload = `{"n":1,"text":"a hundred bytes of JSON payload, roughly what an app sends per update....."}`
	// timeout bounds every wait for an event: a lost update fails the
	// benchmark instead of hanging it.
	timeout = 10 * time.Second
)

// storeKinds are the single-instance configurations, by sub-benchmark name.
var storeKinds = []string{"memory", "bolt", "redis", "postgres"}

// epoch is the origin of the send times carried in the updates: the
// publisher and the subscriber share this process, so both read the
// monotonic clock, which no NTP step can skew.
var epoch = time.Now()

// sinceEpoch returns the monotonic time since epoch, in nanoseconds.
func sinceEpoch() int64 { return int64(time.Since(epoch)) }

// instance is one hub, served over HTTP when serve is set.
type instance struct {
	hub *mercure.Hub
	srv *httptest.Server // nil when not served
}

var keyN atomic.Int64

// pgPrefix is the table prefix of the last pool pgPool made, which the
// second instance of a two-instance benchmark shares.
var pgPrefix string

// pgPool returns a pool on MERCURE_TEST_POSTGRES (64 connections: more
// than the benchmarks' 32 publishers) and a table prefix of the
// benchmark's own, whose tables are dropped when it ends (after the
// stores close).
func pgPool(b *testing.B) (*pgxpool.Pool, string) {
	dsn := os.Getenv("MERCURE_TEST_POSTGRES")
	if dsn == "" {
		b.Skip("set MERCURE_TEST_POSTGRES to a DSN (e.g. postgres://postgres@localhost:6432/postgres?sslmode=disable) to run the PostgreSQL benchmarks")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 64
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	prefix := fmt.Sprintf("bench_%d_%d", os.Getpid(), keyN.Add(1))
	b.Cleanup(func() {
		err := pgtest.Drop(pool, prefix)
		if err != nil {
			b.Errorf("dropping %s_*: %v", prefix, err)
		}
		pool.Close()
	})
	return pool, prefix
}

// startHubs starts n hubs (n > 1 only for "redis" and "postgres": n
// instances sharing one stream or table, each with its own client or
// pool, as n processes would have) on
// the store named kind, optionally each behind an httptest server. Every
// resource is released when b ends, in order: hubs shut down, then their
// servers close, then the stores close, then the Redis keys are deleted.
func startHubs(b *testing.B, kind string, n int, serve bool) []instance {
	b.Helper()
	var stores []store.Store
	switch kind {
	case "memory":
		stores = []store.Store{nil} // a memory store of the hub's own
	case "bolt":
		st, err := boltstore.Open(filepath.Join(b.TempDir(), "hub.db"), boltstore.WithMaxEvents(retained))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := st.Close(); err != nil {
				b.Errorf("closing the bolt store: %v", err)
			}
		})
		stores = []store.Store{st}
	case "redis":
		addr := os.Getenv("MERCURE_TEST_REDIS")
		if addr == "" {
			b.Skip("set MERCURE_TEST_REDIS to a Redis address (e.g. localhost:6399) to run the Redis benchmarks")
		}
		key := fmt.Sprintf("mercure-bench:%d:%d:%d", os.Getpid(), time.Now().UnixNano(), keyN.Add(1))
		for i := range n {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			b.Cleanup(func() { rdb.Close() })
			if i == 0 {
				if err := rdb.Ping(context.Background()).Err(); err != nil {
					b.Fatalf("Redis at %s: %v", addr, err)
				}
				b.Cleanup(func() {
					if err := rdb.Del(context.Background(), key, key+":ids", key+":n").Err(); err != nil {
						b.Errorf("deleting %s: %v", key, err)
					}
				})
			}
			st, err := redisstore.New(rdb, key, redisstore.WithMaxLen(retained))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			stores = append(stores, st)
		}
	case "postgres":
		for i := range n {
			pool, prefix := pgPool(b)
			if i > 0 {
				prefix = pgPrefix
			}
			pgPrefix = prefix
			st, err := pgstore.New(context.Background(), pool, pgstore.WithPrefix(prefix), pgstore.WithMaxEvents(retained))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			stores = append(stores, st)
		}
	default:
		b.Fatalf("unknown store %q", kind)
	}
	if len(stores) != n {
		b.Fatalf("store %q: %d instances asked, %d possible", kind, n, len(stores))
	}
	out := make([]instance, n)
	for i, st := range stores {
		opts := []mercure.Option{
			mercure.WithInsecurePublishing(),
			mercure.WithLogger(slog.New(slog.DiscardHandler)),
		}
		if st == nil {
			m, err := memstore.New(memstore.WithMaxEvents(retained))
			if err != nil {
				b.Fatal(err)
			}
			st = m
		}
		opts = append(opts, mercure.WithStore(st))
		h, err := mercure.New(hubURL, opts...)
		if err != nil {
			b.Fatal(err)
		}
		out[i].hub = h
		if serve {
			out[i].srv = httptest.NewServer(h)
		}
		srv := out[i].srv
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := h.Shutdown(ctx); err != nil {
				b.Errorf("Shutdown: %v", err)
			}
			if srv != nil {
				srv.Close()
			}
		})
	}
	return out
}

// BenchmarkPublish measures the throughput of hub.Publish on a topic
// nobody subscribes to: validation, id, SSE encoding, the store's Append
// and the (empty) dispatch. Publishers run from b.RunParallel with
// parallelism 16, so 32 goroutines on 2 cores: boltstore then commits many
// appends per transaction and fsync (group commit), and redisstore keeps
// several round trips in flight on its client's pool (go-redis default:
// 10 connections per CPU). ns/op is wall time divided by the number of
// publishes, so its inverse is the hub's publish throughput.
//
// Every store retains the last 1000 updates (see retained). boltstore
// fsyncs each commit to the benchmark's temporary directory; redisstore's
// durability is whatever the Redis server is configured with. For Redis
// the figure includes the store's feed reader, which reads back every
// update and hands it to the hub, as in production.
func BenchmarkPublish(b *testing.B) {
	for _, kind := range storeKinds {
		b.Run(kind, func(b *testing.B) {
			hub := startHubs(b, kind, 1, false)[0].hub
			ctx := context.Background()
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				u := mercure.Update{Topics: []string{topic}, Data: payload}
				for pb.Next() {
					if _, err := hub.Publish(ctx, u); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkPublishSerial is BenchmarkPublish from one goroutine: each
// Publish waits for the previous one, so ns/op is the latency of one
// Publish call (for boltstore one transaction and fsync each, for
// redisstore one round trip each).
func BenchmarkPublishSerial(b *testing.B) {
	for _, kind := range storeKinds {
		b.Run(kind, func(b *testing.B) {
			hub := startHubs(b, kind, 1, false)[0].hub
			ctx := context.Background()
			u := mercure.Update{Topics: []string{topic}, Data: payload}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := hub.Publish(ctx, u); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeliver measures publish → deliver latency: the time from just
// before hub.Publish to the moment a subscriber connected over real HTTP
// (an httptest server, loopback TCP, chunked SSE) has read the whole
// event. Data carries the update's sequence number and its send time in
// nanoseconds (on the monotonic clock, see sinceEpoch); the subscriber
// computes now - sent for each event. One goroutine publishes b.N updates
// on one topic, with one subscriber. For "redis-2-instances" the publisher uses hub A and the
// subscriber hub B, two hubs on two stores (and two Redis clients) sharing
// one stream: the update travels A → Redis → B's feed reader → B's stream.
//
// Pacing is closed-loop, with a bound on the updates in flight
// (published, not yet read by the subscriber):
//
//   - inflight=1: each update is published once the previous one has
//     arrived. Nothing queues, so the percentiles are the latency of one
//     update through an idle hub and store; updates/s is about
//     1/latency and says nothing about capacity.
//   - inflight=64: the publisher goes as fast as the pipeline drains,
//     keeping 64 updates in flight. The figure that matters is updates/s,
//     the delivery throughput through one stream; the percentiles then
//     mostly measure the wait behind the other updates in flight (up to
//     about 64 / updates/s) and are not the latency of a lone update. Publish returns only once the
//     memory store or boltstore has handed the update to the hub, so
//     with those the window bounds the updates between the hub and the
//     subscriber; with boltstore, whose Publish waits for its own
//     transaction and fsync, one publishing goroutine gets no group
//     commit and inflight=64 is little faster than inflight=1 (see
//     BenchmarkPublish for concurrent publishers). redisstore returns
//     once Redis has the update, before its feed brings it back.
//
// The per-subscriber queue (Limits.QueueEvents, 1024 by default) never
// holds more than 64 updates, so no stream is dropped for being slow.
//
// Reported: p50-µs, p99-µs and max-µs over the b.N timed updates, and
// updates/s (b.N over the timed wall time). Before the timer starts, 16
// warm-up updates open the connections (and load the Redis script); after
// it stops, a sentinel update follows the last one. The subscriber checks
// that the events arrive in publication order with no gap and no
// duplicate up to the sentinel, and that each carries the id Publish
// returned (compared by 64-bit hash): every update is delivered exactly
// once, or the benchmark fails.
func BenchmarkDeliver(b *testing.B) {
	configs := []struct {
		name, kind string
		instances  int
	}{
		{"memory", "memory", 1},
		{"bolt", "bolt", 1},
		{"redis", "redis", 1},
		{"redis-2-instances", "redis", 2},
		{"postgres", "postgres", 1},
		{"postgres-2-instances", "postgres", 2},
	}
	for _, c := range configs {
		for _, window := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/inflight=%d", c.name, window), func(b *testing.B) {
				benchDeliver(b, c.kind, c.instances, window)
			})
		}
	}
}

// warmup is the number of untimed updates sent before the measured ones.
const warmup = 16

func benchDeliver(b *testing.B, kind string, instances, window int) {
	ins := startHubs(b, kind, instances, true)
	pub, subHub := ins[0].hub, ins[len(ins)-1]
	total := warmup + b.N + 1 // the last one is the sentinel
	sub := subscribe(b, subHub.srv, total, window)

	ctx := context.Background()
	ids := make([]uint64, total) // hashes of the ids Publish returned
	u := mercure.Update{Topics: []string{topic}}
	inFlight := 0
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// received waits for the subscriber to read one more update.
	received := func() {
		timer.Reset(timeout)
		select {
		case <-sub.acks:
			inFlight--
		case <-sub.done:
			b.Fatalf("the stream ended after %d of %d updates: %v", sub.next.Load(), total, sub.err)
		case <-timer.C:
			b.Fatalf("no update arrived in %v: %d of %d received", timeout, sub.next.Load(), total)
		}
	}
	for i := range total {
		switch i {
		case warmup:
			for inFlight > 0 {
				received()
			}
			b.ResetTimer()
		case warmup + b.N:
			for inFlight > 0 {
				received()
			}
			b.StopTimer()
		}
		for inFlight >= window {
			received()
		}
		u.Data = strconv.Itoa(i) + " " + strconv.FormatInt(sinceEpoch(), 10)
		id, err := pub.Publish(ctx, u)
		if err != nil {
			b.Fatalf("publishing update %d: %v", i, err)
		}
		ids[i] = maphash.String(idSeed, id)
		inFlight++
	}
	for inFlight > 0 {
		received()
	}
	// Every ack happened after the subscriber recorded its event.
	for i, id := range ids {
		if sub.ids[i] != id {
			b.Fatalf("update %d: the id received is not the one Publish returned", i)
		}
	}
	sub.close()
	if sub.err != nil {
		b.Fatal(sub.err)
	}

	lat := slices.Clone(sub.lat[warmup : warmup+b.N])
	slices.Sort(lat)
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	b.ReportMetric(us(percentile(lat, 50)), "p50-µs")
	b.ReportMetric(us(percentile(lat, 99)), "p99-µs")
	b.ReportMetric(us(lat[len(lat)-1]), "max-µs")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []int64, p int) int64 {
	rank := (len(sorted)*p + 99) / 100 // ceil(n * p / 100)
	return sorted[max(rank, 1)-1]
}

// subscriber is one SSE stream on topic, read by its own goroutine.
type subscriber struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the reader returns
	// acks gets one value per event read, in order.
	acks chan struct{}
	next atomic.Int64 // sequence number of the next event expected

	// Written by the reader, read once an ack or done says so. Neither
	// slice holds pointers, so that the garbage collector has nothing to
	// scan in them however large b.N is.
	lat []int64  // by sequence number: receive time - send time, ns
	ids []uint64 // by sequence number: maphash of the event's id
	err error    // why the reader stopped, nil for a clean close
}

// idSeed seeds the hashes that compare published and received ids.
var idSeed = maphash.MakeSeed()

// subscribe opens a stream on srv for total events and starts its reader.
// The hub registers the stream before it answers 200, so every update
// published after subscribe returns is delivered to it.
func subscribe(b *testing.B, srv *httptest.Server, total, window int) *subscriber {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		srv.URL+"/.well-known/mercure?match="+url.QueryEscape(topic), nil)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		cancel()
		b.Fatalf("subscribe: %s", res.Status)
	}
	s := &subscriber{
		cancel: cancel,
		done:   make(chan struct{}),
		acks:   make(chan struct{}, window),
		lat:    make([]int64, total),
		ids:    make([]uint64, total),
	}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		s.err = s.read(ctx, bufio.NewScanner(res.Body), total)
		if ctx.Err() != nil && !errors.Is(s.err, errProtocol) {
			s.err = nil // stopped by close
		}
	}()
	b.Cleanup(s.close) // idempotent: also runs when b fails early
	return s
}

// errProtocol marks what the reader saw wrong in the stream itself.
var errProtocol = errors.New("bad stream")

// read parses the stream as EventSource does, for the lines the hub sends
// (id, data, blank line; comments ignored), and records each event when
// its blank line arrives.
func (s *subscriber) read(ctx context.Context, sc *bufio.Scanner, total int) error {
	var id, data string
	var hasData bool
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if !hasData {
				continue
			}
			now := sinceEpoch()
			seqText, sentText, _ := strings.Cut(data, " ")
			seq, err1 := strconv.Atoi(seqText)
			sent, err2 := strconv.ParseInt(sentText, 10, 64)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("%w: event data %q", errProtocol, data)
			}
			next := int(s.next.Load())
			if seq != next || seq >= total {
				return fmt.Errorf("%w: got update %d, want %d (a gap, a duplicate or a reordering)", errProtocol, seq, next)
			}
			s.lat[seq], s.ids[seq] = now-sent, maphash.String(idSeed, id)
			s.next.Store(int64(next + 1))
			select {
			case s.acks <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			id, data, hasData = "", "", false
		case strings.HasPrefix(line, ":"):
			// a keep-alive comment
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "id":
				id = value
			case "data":
				if hasData {
					data += "\n"
				}
				data += value
				hasData = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the hub ended the stream")
}

// close stops the reader and waits for it.
func (s *subscriber) close() {
	s.cancel()
	<-s.done
}

// BenchmarkPublishTx measures pgstore's transactional publish: each
// operation is one transaction holding the application's own insert (a
// row of a table of its own) and Store.PublishTx, committed; 32
// goroutines as in BenchmarkPublish, and one ("serial"). The feed then
// sequences the updates and reads them back, as in production, but
// nobody waits for them: ns/op is the wall time per committed
// transaction.
func BenchmarkPublishTx(b *testing.B) {
	for _, par := range []int{16, 0} {
		name := "32-goroutines"
		if par == 0 {
			name = "serial"
		}
		b.Run(name, func(b *testing.B) {
			pool, prefix := pgPool(b)
			st, err := pgstore.New(context.Background(), pool, pgstore.WithPrefix(prefix), pgstore.WithMaxEvents(retained))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `CREATE TABLE `+prefix+`_app (id bigserial PRIMARY KEY, title text NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			insert := `INSERT INTO ` + prefix + `_app (title) VALUES ($1)`
			op := func() error {
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, insert, "a task"); err != nil {
						return err
					}
					_, err := st.PublishTx(ctx, tx, mercure.Update{Topics: []string{topic}, Data: payload})
					return err
				})
			}
			b.ReportAllocs()
			b.ResetTimer()
			if par == 0 {
				for b.Loop() {
					if err := op(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := op(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
