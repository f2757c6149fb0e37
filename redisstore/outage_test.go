package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/redistest"
	"github.com/mercurekit/mercure/internal/ssetest"
	"github.com/mercurekit/mercure/redisstore"
	"github.com/mercurekit/mercure/storetest"
	"github.com/redis/go-redis/v9"
)

// feed records what a store's feed passes to a listener.
type feed struct {
	events chan string
	status chan error
}

func listen(t *testing.T, s mercure.Store) *feed {
	f := &feed{events: make(chan string, 1000), status: make(chan error, 100)}
	t.Cleanup(s.Listen(mercure.Listener{
		Event:  func(e *mercure.Event) { f.events <- e.ID },
		Status: func(err error) { f.status <- err },
	}))
	return f
}

func (f *feed) wantStatus(t *testing.T, down bool, within time.Duration) {
	t.Helper()
	select {
	case err := <-f.status:
		if (err != nil) != down {
			t.Fatalf("feed status %v, want down=%v", err, down)
		}
	case <-time.After(within):
		t.Fatalf("no feed status (want down=%v) within %v", down, within)
	}
}

func (f *feed) wantEvents(t *testing.T, ids ...string) {
	t.Helper()
	for _, want := range ids {
		select {
		case id := <-f.events:
			if id != want {
				t.Fatalf("feed passed %s, want %s", id, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("feed did not pass %s", want)
		}
	}
	select {
	case id := <-f.events:
		t.Fatalf("feed passed an extra event %s", id)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestOutage kills Redis under a store: Append fails within the timeout
// instead of hanging, the feed reports the outage and its end, history
// acknowledged before the crash survives (appendfsync always), and the
// feed resumes with what is appended after the restart.
func TestOutage(t *testing.T) {
	srv := redistest.Start(t, true)
	s := open(t, srv.Client(), "mercure", redisstore.WithTimeout(time.Second))
	defer s.Close()
	f := listen(t, s)
	ctx := context.Background()
	if err := s.Append(ctx, storetest.NewEvent("before")); err != nil {
		t.Fatal(err)
	}
	f.wantEvents(t, "before")

	srv.Kill()
	f.wantStatus(t, true, 5*time.Second)
	start := time.Now()
	err := s.Append(ctx, storetest.NewEvent("during"))
	if err == nil {
		t.Fatal("Append succeeded while Redis is down")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Append took %v to fail with a 1s timeout", d)
	}
	if _, err := s.Replay(ctx, mercure.Earliest); err == nil {
		t.Fatal("Replay succeeded while Redis is down")
	}

	srv.Start()
	f.wantStatus(t, false, 10*time.Second)
	if err := s.Append(ctx, storetest.NewEvent("after")); err != nil {
		t.Fatal(err)
	}
	f.wantEvents(t, "after")
	if _, ids := storetest.ReplayIDs(t, s, mercure.Earliest); strings.Join(ids, " ") != "before after" {
		t.Fatalf("history after the restart: %q", ids)
	}
}

// TestListenDuringOutage checks that a listener added while the feed is
// down is told at once.
func TestListenDuringOutage(t *testing.T) {
	srv := redistest.Start(t, false)
	s := open(t, srv.Client(), "mercure", redisstore.WithTimeout(time.Second))
	defer s.Close()
	first := listen(t, s)
	srv.Kill()
	first.wantStatus(t, true, 5*time.Second)
	listen(t, s).wantStatus(t, true, time.Second)
}

// TestAppendRetryIsIdempotent loses the reply to an append: go-redis
// retries the script, which finds its event already recorded and returns
// that entry. The update is recorded and delivered once.
func TestAppendRetryIsIdempotent(t *testing.T) {
	admin, key := client(t)
	proxy := newProxy(t, admin.Options().Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	defer rdb.Close()
	s := open(t, rdb, key)
	defer s.Close()
	f := listen(t, s)
	ctx := context.Background()
	e0 := storetest.NewEvent("e0") // loads the script: the retry is an EVALSHA too
	if err := s.Append(ctx, e0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e1", "e0"} { // e0 again: a reused id, whose latest occurrence is retried
		before := proxy.scripts.Load()
		proxy.armed.Store(true)
		e := storetest.NewEvent(id)
		if err := s.Append(ctx, e); err != nil {
			t.Fatalf("Append %s after a lost reply: %v", id, err)
		}
		if proxy.armed.Load() {
			t.Fatal("no reply was dropped")
		}
		if n := proxy.scripts.Load() - before; n < 2 {
			t.Fatalf("the client sent the script %d times: no retry to test", n)
		}
	}
	f.wantEvents(t, "e0", "e1", "e0")
	if n, err := admin.XLen(ctx, key).Result(); err != nil || n != 3 {
		t.Fatalf("stream length %d (%v), want 3", n, err)
	}
	if b, ids := storetest.ReplayIDs(t, s, "e0"); b.Cursor != "e0" || strings.Join(ids, " ") != "e1 e0" {
		t.Fatalf("replay after e0 (REC-7: its oldest occurrence): %q", ids)
	}
}

// TestLatestID checks that a store, and a hub started on it, know the
// last event of a stream with history (REC-13).
func TestLatestID(t *testing.T) {
	rdb, key := client(t)
	a := open(t, rdb, key)
	defer a.Close()
	if got := a.LatestID(); got != mercure.Earliest {
		t.Fatalf("empty stream: LatestID %q", got)
	}
	for _, id := range []string{"l1", "l2"} {
		if err := a.Append(context.Background(), storetest.NewEvent(id)); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.LatestID(); got != "l2" {
		t.Fatalf("after two appends: LatestID %q", got)
	}
	b := open(t, rdb, key)
	defer b.Close()
	h, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithStore(b))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	if got := h.LastEventID(); got != "l2" {
		t.Fatalf("hub on a stream with history: LastEventID %q, want l2", got)
	}
}

// instance is one app instance: a hub on its own client and store.
type instance struct {
	hub   *mercure.Hub
	store *redisstore.Store
	rdb   *redis.Client
	srv   *httptest.Server
}

const (
	hubURL = "https://example.com/.well-known/mercure"
	topic  = "https://example.com/books/1"
)

func newInstance(t *testing.T, addr, key string, opts ...redisstore.Option) *instance {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	st := open(t, rdb, key, opts...)
	h, err := mercure.New(hubURL, mercure.WithStore(st),
		mercure.WithAnonymousSubscribers(), mercure.WithInsecurePublishing(), mercure.WithSubscriptions(),
		mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{hub: h, store: st, rdb: rdb, srv: httptest.NewServer(h)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		in.srv.Close()
		st.Close()
		rdb.Close()
	})
	return in
}

// subscribe opens a stream on in matching topic, resuming after
// lastEventID when it is not empty.
func subscribe(t *testing.T, in *instance, lastEventID string) *ssetest.Stream {
	t.Helper()
	return ssetest.Subscribe(t, in.srv, "/.well-known/mercure", "match="+url.QueryEscape(topic), lastEventID)
}

func publish(in *instance, data string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return in.hub.Publish(ctx, mercure.Update{Topics: []string{topic}, Data: data})
}

// mustPublish publishes data on in and returns the update's id.
func mustPublish(t *testing.T, in *instance, data string) string {
	t.Helper()
	id, err := publish(in, data)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestReconnectToOtherInstance: a subscriber of instance A leaves and
// resumes on instance B with Last-Event-ID; it misses nothing published on
// either meanwhile and gets nothing twice (REC-4 across instances).
func TestReconnectToOtherInstance(t *testing.T) {
	rdb, key := client(t)
	a, b := newInstance(t, rdb.Options().Addr, key), newInstance(t, rdb.Options().Addr, key)
	sub := subscribe(t, a, "")
	var first []string
	for i := range 3 {
		first = append(first, mustPublish(t, a, fmt.Sprint("first ", i)))
	}
	if got := sub.Collect(3); !slices.Equal(got, first) {
		t.Fatalf("instance A sent %q, want %q", got, first)
	}
	sub.Close()
	var rest []string
	for i, in := range []*instance{a, b, a, b} {
		rest = append(rest, mustPublish(t, in, fmt.Sprint("rest ", i)))
	}
	resumed := subscribe(t, b, first[2])
	if h := resumed.Header.Get("Mercure-Last-Event-ID"); h != first[2] {
		t.Fatalf("Mercure-Last-Event-ID %q, want %q (REC-9)", h, first[2])
	}
	if got := resumed.Collect(len(rest)); !slices.Equal(got, rest) {
		t.Fatalf("instance B resumed with %q, want %q", got, rest)
	}
}

// TestRedisRestartMidStream kills and restarts Redis while a subscriber
// of instance B follows updates published on instance A: publishing fails
// fast during the outage (ErrStore, HTTP 503), both hubs report it, and
// the subscriber gets every acknowledged update exactly once, in order,
// those before the crash and those after the restart, without
// reconnecting. History acknowledged before the crash survives.
func TestRedisRestartMidStream(t *testing.T) {
	srv := redistest.Start(t, true)
	a := newInstance(t, srv.Addr, "mercure", redisstore.WithTimeout(time.Second))
	b := newInstance(t, srv.Addr, "mercure", redisstore.WithTimeout(time.Second))
	sub := subscribe(t, b, "")

	var acked []string
	for i := range 5 {
		acked = append(acked, mustPublish(t, a, fmt.Sprint("before ", i)))
	}

	srv.Kill()
	start := time.Now()
	_, err := publish(a, "during")
	if !errors.Is(err, mercure.ErrStore) {
		t.Fatalf("publish during the outage: %v, want ErrStore", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("publish took %v to fail", d)
	}
	resp, err := http.PostForm(a.srv.URL+"/.well-known/mercure", url.Values{"topic": {topic}, "data": {"during"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("HTTP publish during the outage: %s, want 503", resp.Status)
	}
	waitFor(t, "both hubs to report the outage", func() bool {
		return a.hub.Stats().FeedError != nil && b.hub.Stats().FeedError != nil
	})

	srv.Start()
	waitFor(t, "both hubs to report the feed back", func() bool {
		return a.hub.Stats().FeedError == nil && b.hub.Stats().FeedError == nil
	})
	for i := range 5 {
		acked = append(acked, mustPublish(t, a, fmt.Sprint("after ", i)))
	}
	if got := sub.Collect(len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("subscriber of B got %q\nwant %q", got, acked)
	}
	resumed := subscribe(t, a, acked[1])
	if got := resumed.Collect(len(acked) - 2); !slices.Equal(got, acked[2:]) {
		t.Fatalf("replay on A after the restart: %q\nwant %q", got, acked[2:])
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHungRedis pauses Redis (it accepts nothing and answers nothing, as
// a hung process or a dropped network): with ContextTimeoutEnabled, Append
// fails within WithTimeout, the feed reports the outage within about a
// second past its block, Close returns promptly, and all recovers when
// Redis does.
func TestHungRedis(t *testing.T) {
	srv := redistest.Start(t, false)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	s := open(t, rdb, "mercure", redisstore.WithTimeout(300*time.Millisecond))
	f := listen(t, s)
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	if err := s.Append(context.Background(), storetest.NewEvent("x")); err == nil {
		t.Fatal("Append succeeded on a paused Redis")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Append took %v with WithTimeout(300ms)", d)
	}
	f.wantStatus(t, true, 3*time.Second)
	srv.Resume()
	f.wantStatus(t, false, 10*time.Second)
	if err := s.Append(context.Background(), storetest.NewEvent("y")); err != nil {
		t.Fatal(err)
	}
	f.wantEvents(t, "y")

	srv.Pause()
	time.Sleep(50 * time.Millisecond) // the feed is in a read
	start = time.Now()
	s.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v on a paused Redis", d)
	}
}

// partitioned returns two stores on one stream of maxLen entries: a
// reaches Redis through a proxy that can cut it off, b directly.
func partitioned(t *testing.T, maxLen int64) (p *proxy, a, b *redisstore.Store) {
	admin, key := client(t)
	p = newProxy(t, admin.Options().Addr)
	rdbA := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { rdbA.Close() })
	a = open(t, rdbA, key, redisstore.WithMaxLen(maxLen), redisstore.WithTimeout(time.Second))
	b = open(t, admin, key, redisstore.WithMaxLen(maxLen))
	t.Cleanup(func() { a.Close(); b.Close() })
	return p, a, b
}

// journal records what a store's feed passes to a listener: event ids and
// "GAP", in order, and status changes.
type journal struct {
	mu     sync.Mutex
	log    []string
	status chan error
}

func record(t *testing.T, s mercure.Store) *journal {
	j := &journal{status: make(chan error, 10)}
	t.Cleanup(s.Listen(mercure.Listener{
		Event:  func(e *mercure.Event) { j.mu.Lock(); j.log = append(j.log, e.ID); j.mu.Unlock() },
		Status: func(err error) { j.status <- err },
		Gap:    func() { j.mu.Lock(); j.log = append(j.log, "GAP"); j.mu.Unlock() },
	}))
	return j
}

func (j *journal) entries() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.log)
}

func (j *journal) wantStatus(t *testing.T, down bool) {
	t.Helper()
	select {
	case err := <-j.status:
		if (err != nil) != down {
			t.Fatalf("feed status %v, want down=%v", err, down)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no feed status (want down=%v) within 10s", down)
	}
}

// TestGapAfterTrimDuringOutage cuts one store off Redis while another
// appends more than the retention holds: when the feed is back, it
// reports the gap before it passes the retained events, instead of
// skipping the trimmed ones silently.
func TestGapAfterTrimDuringOutage(t *testing.T) {
	proxy, a, b := partitioned(t, 10)
	j := record(t, a)
	appendN(t, b, "before", 1)
	waitFor(t, "the first event", func() bool { return len(j.entries()) == 1 })
	proxy.Cut()
	j.wantStatus(t, true)
	for i := range 30 {
		appendN(t, b, fmt.Sprint("e", i), 1)
	}
	proxy.Mend(t)
	j.wantStatus(t, false)
	waitFor(t, "the last event", func() bool { log := j.entries(); return log[len(log)-1] == "e29" })
	log := j.entries()
	if len(log) < 3 || log[0] != "before" || log[1] != "GAP" || log[2] == "e0" {
		t.Fatalf("listener saw %q, want before, GAP, then the retained events", log)
	}
	var first int
	fmt.Sscanf(log[2], "e%d", &first)
	for i, id := range log[2:] {
		if id != fmt.Sprint("e", first+i) {
			t.Fatalf("listener saw %q, want consecutive events after the gap", log)
		}
	}
}

// TestNoGapWhenNothingWasTrimmed: an outage during which nothing is
// trimmed reports no gap.
func TestNoGapWhenNothingWasTrimmed(t *testing.T) {
	proxy, a, b := partitioned(t, 100)
	gaps := make(chan struct{}, 10)
	f := &feed{events: make(chan string, 100), status: make(chan error, 10)}
	defer a.Listen(mercure.Listener{
		Event:  func(e *mercure.Event) { f.events <- e.ID },
		Status: func(err error) { f.status <- err },
		Gap:    func() { gaps <- struct{}{} },
	})()
	proxy.Cut()
	f.wantStatus(t, true, 5*time.Second)
	for _, id := range []string{"p", "q"} {
		if err := b.Append(context.Background(), storetest.NewEvent(id)); err != nil {
			t.Fatal(err)
		}
	}
	proxy.Mend(t)
	f.wantStatus(t, false, 10*time.Second)
	f.wantEvents(t, "p", "q")
	if len(gaps) > 0 {
		t.Fatal("gap reported though nothing was trimmed")
	}
}

// slowUnlisten is a store whose listener cancellation takes a while, to
// widen the window in which the feed reports a gap during Hub.Shutdown.
type slowUnlisten struct{ *redisstore.Store }

func (s slowUnlisten) Listen(l mercure.Listener) func() {
	cancel := s.Store.Listen(l)
	return func() { time.Sleep(300 * time.Millisecond); cancel() }
}

// TestGapDuringShutdown: a gap reported while the hub shuts down must
// not deadlock (the hub's feedGap and Shutdown, the store's listeners
// lock).
func TestGapDuringShutdown(t *testing.T) {
	rdb, key := client(t)
	a, b := open(t, rdb, key), open(t, rdb, key)
	defer a.Close()
	defer b.Close()
	h, err := mercure.New(hubURL, mercure.WithStore(slowUnlisten{a}), mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	appendN(t, b, "first", 1)
	waitFor(t, "the first event", func() bool { return h.LastEventID() == "first" })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		done <- h.Shutdown(ctx)
	}()
	time.Sleep(50 * time.Millisecond) // Shutdown is cancelling the listener
	if err := rdb.IncrBy(ctx, key+":n", 5).Err(); err != nil {
		t.Fatal(err)
	}
	appendN(t, b, "after-gap", 1)
	select {
	case <-done:
	case <-time.After(8 * time.Second):
		t.Fatal("Hub.Shutdown deadlocked with the feed's gap report")
	}
}

// TestLargeBacklogOnSlowLink: a feed that must catch up on large events
// through a slow link gets replies too large to arrive within its
// deadline; it asks for fewer entries per read and catches up, instead of
// retrying the same read forever.
func TestLargeBacklogOnSlowLink(t *testing.T) {
	admin, key := client(t)
	p := newProxy(t, admin.Options().Addr)
	p.rate = 20 << 20 // 20 MiB/s
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	a := open(t, rdb, key, redisstore.WithTimeout(500*time.Millisecond))
	defer a.Close()
	b := open(t, admin, key)
	defer b.Close()
	var got atomic.Int64
	hold := make(chan struct{})
	var once sync.Once
	defer a.Listen(mercure.Listener{Event: func(*mercure.Event) {
		once.Do(func() { <-hold }) // the feed falls behind
		got.Add(1)
	}})()
	appendN(t, b, "first", 1)
	time.Sleep(300 * time.Millisecond)
	data := strings.Repeat("x", 256<<10)
	const n = 200 // 50 MiB: 2.5 s through the link, five times the deadline
	for i := range n {
		e := storetest.NewEvent(fmt.Sprint("big", i))
		e.Data = data
		if err := b.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	close(hold)
	deadline := time.Now().Add(30 * time.Second)
	for got.Load() < n+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events delivered: the feed never caught up", got.Load(), n+1)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBusyRedisIsNotAnOutage: a Redis busy for 1.5 s (a slow script, a
// large deletion) is not reported as a failing feed.
func TestBusyRedisIsNotAnOutage(t *testing.T) {
	srv := redistest.Start(t, false)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	s := open(t, rdb, "mercure")
	defer s.Close()
	f := listen(t, s)
	time.Sleep(100 * time.Millisecond)
	const busy = `local t0 = redis.call('TIME') local s = t0[1] * 1000000 + t0[2]
while true do local t = redis.call('TIME') if t[1] * 1000000 + t[2] - s > 1500000 then break end end
return 1`
	if err := srv.Client().Eval(context.Background(), busy, nil).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-f.status:
		t.Fatalf("feed reported %v for a Redis busy 1.5 s", err)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestGapFromEmptyStream: a store started on an empty stream knows that
// the first entry is number 1, so trimming before its first read is a gap
// too.
func TestGapFromEmptyStream(t *testing.T) {
	proxy, a, b := partitioned(t, 10)
	j := record(t, a)
	proxy.Cut()
	j.wantStatus(t, true)
	for i := range 30 {
		appendN(t, b, fmt.Sprint("e", i), 1)
	}
	proxy.Mend(t)
	j.wantStatus(t, false)
	waitFor(t, "e29", func() bool { log := j.entries(); return len(log) > 0 && log[len(log)-1] == "e29" })
	if log := j.entries(); log[0] != "GAP" {
		t.Fatalf("listener saw %q: entries skipped without a gap", log)
	}
}
