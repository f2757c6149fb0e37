package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/redisstore"
	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/storetest"
	"github.com/redis/go-redis/v9"
)

// feed records what a store's feed passes to a listener.
type feed struct {
	s      store.Store // the store listened to, to which wantEvents appends
	events chan string
	status chan error
}

func listen(t *testing.T, s store.Store) *feed {
	f := &feed{s: s, events: make(chan string, 1000), status: make(chan error, 100)}
	t.Cleanup(s.Listen(store.Listener{
		Event:  func(e *store.Event) { f.events <- e.ID },
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

var markerN atomic.Int64

// wantEvents checks that the feed passes ids, and nothing else: it
// appends a marker through the feed's store and wants it right after
// them. The feed passes the stream's entries in order, each once, and
// the marker is added after every event appended before wantEvents: an
// extra event (one recorded or passed twice) would come before it. The
// marker is in the stream after that, for replays too.
func (f *feed) wantEvents(t *testing.T, ids ...string) {
	t.Helper()
	marker := fmt.Sprint("urn:marker:", markerN.Add(1))
	storetest.MustAppend(t, f.s, storetest.NewEvent(marker))
	for _, want := range append(ids, marker) {
		select {
		case id := <-f.events:
			if id != want {
				t.Fatalf("feed passed %s, want %s", id, want)
			}
		case <-time.After(storetest.Deadline):
			t.Fatalf("feed did not pass %s", want)
		}
	}
}

// TestOutageSuite runs the outage cases shared with the other stores on
// the network: Redis killed and restarted (a server of the test's own,
// with appendfsync always), and a store cut off by a proxy.
func TestOutageSuite(t *testing.T) {
	t.Parallel()
	storetest.RunOutage(t, func(t *testing.T, restartable bool) *storetest.OutageServer {
		var addr, key string
		var srv *redistest.Server
		if restartable {
			srv = redistest.Start(t, true)
			addr, key = srv.Addr, "mercure"
		} else {
			var admin *redis.Client
			admin, key = client(t)
			addr = admin.Options().Addr
		}
		p := newProxy(t, addr)
		o := &storetest.OutageServer{
			Open: func(t *testing.T, keep int, cut bool) store.Store {
				to := addr
				if cut {
					to = p.Addr()
				}
				rdb := redis.NewClient(&redis.Options{Addr: to})
				t.Cleanup(func() { rdb.Close() }) // after the store closes
				opts := []redisstore.Option{redisstore.WithTimeout(time.Second)}
				if keep > 0 {
					opts = append(opts, redisstore.WithMaxLen(int64(keep)))
				}
				return open(t, rdb, key, opts...)
			},
			Cut: p.Cut, Mend: p.Mend, LoseReply: p.LoseReply, Timeout: time.Second,
		}
		if srv != nil {
			o.Kill = func(*testing.T) { srv.Kill() }
			o.Restart = func(*testing.T) { srv.Start() }
		}
		return o
	})
}

// TestAppendRetryIsIdempotent loses the reply to an append: go-redis
// retries the script, which finds its event already recorded and returns
// that entry. The update is recorded and delivered once.
func TestAppendRetryIsIdempotent(t *testing.T) {
	t.Parallel()
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
	if n, err := admin.XLen(ctx, key).Result(); err != nil || n != 3 {
		t.Fatalf("stream length %d (%v), want 3", n, err)
	}
	if b, ids := storetest.ReplayIDs(t, s, "e0"); b.Cursor != "e0" || strings.Join(ids, " ") != "e1 e0" {
		t.Fatalf("replay after e0 (REC-7: its oldest occurrence): %q", ids)
	}
	f.wantEvents(t, "e0", "e1", "e0")
}

// TestLatestID checks that a store, and a hub started on it, know the
// last event of a stream with history (REC-13).
func TestLatestID(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	a := open(t, rdb, key)
	defer a.Close()
	if got := a.LatestID(); got != store.Earliest {
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
	hub     *mercure.Hub
	store   *redisstore.Store
	rdb     *redis.Client
	srv     *httptest.Server
	scripts *cmdHook // the client's scripts in flight
}

const (
	hubURL = "https://example.com/.well-known/mercure"
	topic  = "https://example.com/books/1"
)

func newInstance(t *testing.T, addr, key string, opts ...redisstore.Option) *instance {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	scripts := &cmdHook{names: []string{"evalsha", "eval"}}
	rdb.AddHook(scripts)
	st := open(t, rdb, key, opts...)
	h, err := mercure.New(hubURL, mercure.WithStore(st),
		mercure.WithAnonymousSubscribers(), mercure.WithInsecurePublishing(), mercure.WithSubscriptions(),
		mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{hub: h, store: st, rdb: rdb, srv: httptest.NewServer(h), scripts: scripts}
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
func subscribe(t *testing.T, in *instance, lastEventID string) *storetest.Stream {
	t.Helper()
	return storetest.Subscribe(t, in.srv, "/.well-known/mercure", "match="+url.QueryEscape(topic), lastEventID)
}

// TestHungRedis pauses Redis (it accepts nothing and answers nothing, as
// a hung process or a dropped network): with ContextTimeoutEnabled, Append
// fails within WithTimeout, the feed reports the outage within about a
// second past its block, Close returns promptly, and all recovers when
// Redis does.
func TestHungRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, false)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	reads := &cmdHook{names: []string{"xread"}}
	rdb.AddHook(reads)
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
	f.wantStatus(t, false, storetest.Deadline)
	// Redis is back: the append succeeds, if need be on a retry (its
	// 300 ms can run out on a busy machine).
	storetest.MustAppend(t, s, storetest.NewEvent("y"))
	f.wantEvents(t, "y")

	srv.Pause()
	// The feed is in a read, which the paused server will not answer:
	// the one under way when it paused (unless its reply had left just
	// before, a matter of microseconds in its 200 ms block), or the next.
	storetest.WaitFor(t, "the feed to be in a read", func() bool { return reads.inFlight.Load() > 0 })
	start = time.Now()
	s.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v on a paused Redis", d)
	}
}

// cmdHook counts a client's commands in flight among those it names:
// the feed's reads ("xread"), the scripts (appends among them).
type cmdHook struct {
	names    []string
	inFlight atomic.Int64
}

func (h *cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !slices.Contains(h.names, cmd.Name()) {
			return next(ctx, cmd)
		}
		h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		return next(ctx, cmd)
	}
}
func (h *cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// gatedUnlisten is a store whose listener cancellation, once called
// (unlistening is closed), waits for release; and which closes gapped
// once its feed has passed a gap to the hub. A test holds Hub.Shutdown in
// the cancellation while the feed reports a gap.
type gatedUnlisten struct {
	*redisstore.Store
	unlistening, gapped, release chan struct{}
	gapOnce, unlistenOnce        sync.Once
}

func (s *gatedUnlisten) Listen(l store.Listener) func() {
	gap := l.Gap
	l.Gap = func() {
		gap()
		s.gapOnce.Do(func() { close(s.gapped) })
	}
	cancel := s.Store.Listen(l)
	return func() {
		s.unlistenOnce.Do(func() { close(s.unlistening) })
		<-s.release
		cancel()
	}
}

// TestGapDuringShutdown: a gap reported while the hub shuts down must
// not deadlock (the hub's feedGap and Shutdown, the store's listeners
// lock).
func TestGapDuringShutdown(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	a, b := open(t, rdb, key), open(t, rdb, key)
	defer a.Close()
	defer b.Close()
	gated := &gatedUnlisten{Store: a, unlistening: make(chan struct{}), gapped: make(chan struct{}), release: make(chan struct{})}
	h, err := mercure.New(hubURL, mercure.WithStore(gated), mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	appendN(t, b, "first", 1)
	storetest.WaitFor(t, "the first event", func() bool { return h.LastEventID() == "first" })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		done <- h.Shutdown(ctx)
	}()
	select {
	case <-gated.unlistening:
	case <-time.After(storetest.Deadline):
		t.Fatal("Hub.Shutdown did not cancel its listener")
	}
	// Shutdown is held in the cancellation: the feed reports a gap (the
	// counter skips 5 numbers), which must reach the hub meanwhile.
	if err := rdb.IncrBy(ctx, key+":n", 5).Err(); err != nil {
		t.Fatal(err)
	}
	appendN(t, b, "after-gap", 1)
	select {
	case <-gated.gapped:
	case <-time.After(storetest.Deadline):
		t.Fatal("the feed's gap report deadlocked with Hub.Shutdown")
	}
	close(gated.release)
	select {
	case <-done:
	case <-time.After(storetest.Deadline):
		t.Fatal("Hub.Shutdown did not return")
	}
}

// TestLargeBacklogOnSlowLink: a feed that must catch up on large events
// through a slow link gets replies too large to arrive within its
// deadline; it asks for fewer entries per read and catches up, instead of
// retrying the same read forever.
func TestLargeBacklogOnSlowLink(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: replays megabytes through a throttled link")
	}
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
	held, hold := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer a.Listen(store.Listener{Event: func(*store.Event) {
		once.Do(func() { close(held); <-hold }) // the feed falls behind
		got.Add(1)
	}})()
	appendN(t, b, "first", 1)
	select {
	case <-held:
	case <-time.After(storetest.Deadline):
		t.Fatal("the feed did not pass the first event")
	}
	data := strings.Repeat("x", 256<<10)
	const n = 100 // 25 MiB: 1.25 s through the link, twice the feed's deadline of 0.7 s
	for i := range n {
		e := storetest.NewEvent(fmt.Sprint("big", i))
		e.Data = data
		if err := b.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	close(hold)
	// It may go slowly (-race, a loaded machine), but it must go: a feed
	// retrying the same read forever makes no progress.
	for got.Load() < n+1 {
		last := got.Load()
		if !storetest.Within(storetest.Deadline, func() bool { return got.Load() > last }) {
			t.Fatalf("%d of %d events delivered: the feed stopped catching up", last, n+1)
		}
	}
}

// TestBusyRedisIsNotAnOutage: a Redis busy for 1.5 s (a slow script, a
// large deletion) is not reported as a failing feed.
func TestBusyRedisIsNotAnOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: keeps a Redis server busy for seconds")
	}
	srv := redistest.Start(t, false)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	s := open(t, rdb, "mercure", redisstore.WithTimeout(redisstore.DefaultTimeout)) // the outage bound tested
	defer s.Close()
	f := listen(t, s)
	if err := s.Append(context.Background(), storetest.NewEvent("before")); err != nil {
		t.Fatal(err)
	}
	f.wantEvents(t, "before") // the feed reads
	srv.Busy(1500 * time.Millisecond)
	// A feed that took the busy Redis for an outage reported it before it
	// passed the next event (it reports, backs off, reconnects, reads).
	if err := s.Append(context.Background(), storetest.NewEvent("after")); err != nil {
		t.Fatal(err)
	}
	f.wantEvents(t, "after")
	select {
	case err := <-f.status:
		t.Fatalf("feed reported %v for a Redis busy 1.5 s", err)
	default:
	}
}
