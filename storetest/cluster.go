package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/seqcheck"
	"github.com/mercurekit/mercure/internal/testwait"
)

// RunCluster runs the hub-level contract of a store shared by several
// hubs: open returns a new handle on the same history at each call (the
// same [memstore.Store] again, or a new client of one Redis stream,
// one PostgreSQL database); the cases use topics and ids of their own.
// Every distinct handle that implements io.Closer is closed when the
// test ends. The history must keep a few thousand events.
//
// The cases:
//
//   - PublishThenOpen: once [mercure.Hub.Publish] (or a POST) returns, a
//     stream opened on the same hub without Last-Event-ID starts at
//     the update (its position block) and does not get it; a stream
//     opened on another hub right after starts at whatever position that
//     hub's feed has reached, and gets every update after it (the update
//     live when its position precedes it) and none before.
//   - Traffic: three hubs, publishers on each, streams opening, moving to
//     another hub with Last-Event-ID and closing during the traffic, one
//     hub's feed held back then released at once after a gap report:
//     each stream gets every
//     update of the store after its start, in the store's order, once,
//     or ends and resumes from history (a skip is allowed only where the
//     hub reported it); every acknowledged update is recorded once; the
//     held hub's queues stay within MaxQueuedBytes.
func RunCluster(t *testing.T, open func(t *testing.T) store.Store) {
	var mu sync.Mutex
	closed := map[store.Store]bool{}
	parent := t
	handle := func(t *testing.T) store.Store {
		t.Helper()
		s := open(t)
		mu.Lock()
		defer mu.Unlock()
		if c, ok := s.(io.Closer); ok && !closed[s] {
			closed[s] = true
			parent.Cleanup(func() {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		return s
	}
	t.Run("PublishThenOpen", func(t *testing.T) { testPublishThenOpen(t, handle) })
	t.Run("Traffic", func(t *testing.T) { testTraffic(t, handle) })
}

var clusterN atomic.Int64

// clusterHub is one app instance of a cluster: a hub on a store handle
// of its own, served.
type clusterHub struct {
	name  string
	hub   *mercure.Hub
	store store.Store
	srv   *httptest.Server
	// refused counts the publishes that failed, to be sent again.
	refused atomic.Int64
}

func newClusterHub(t *testing.T, name string, s store.Store, opts ...mercure.Option) *clusterHub {
	t.Helper()
	opts = append([]mercure.Option{mercure.WithStore(s), mercure.WithAnonymousSubscribers(),
		mercure.WithInsecurePublishing(), mercure.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	h, err := mercure.New(outageHubURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := &clusterHub{name: name, hub: h, store: s, srv: httptest.NewServer(h)}
	t.Cleanup(func() { // before the store closes
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		c.srv.CloseClientConnections()
		c.srv.Close()
	})
	return c
}

// publish publishes u on topic until the hub acknowledges it, sending it
// again with the same id after a failure of the store (a retry is
// recorded once), for testwait.Deadline at most. It may run on a
// goroutine of its own: it fails t with t.Errorf.
func (c *clusterHub) publish(t *testing.T, topic string, u mercure.Update) {
	t.Helper()
	u.Topics = []string{topic}
	var err error
	acked := testwait.Within(testwait.Deadline, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var id string
		id, err = c.hub.Publish(ctx, u)
		if err == nil && id != u.ID {
			t.Errorf("Publish(%q) returned id %q", u.ID, id)
		}
		if err != nil {
			c.refused.Add(1)
		}
		// Stop at success, and at an error that is not the store's.
		return err == nil || !errors.Is(err, mercure.ErrStore) && !errors.Is(err, context.DeadlineExceeded)
	})
	if !acked || err != nil {
		t.Errorf("Publish(%q) on hub %s: %v", u.ID, c.name, err)
	}
}

// storeOrder returns the store's order: the ids of every event s holds,
// and those on topic. It fails t if an event on topic is there twice.
func storeOrder(t *testing.T, s store.Store, topic string) (o seqcheck.Order, ids []string) {
	t.Helper()
	b, err := s.Replay(context.Background(), store.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	on := map[string]bool{}
	for e, err := range b.Events {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, e.ID)
		if len(e.Topics) == 0 || e.Topics[0] != topic {
			continue
		}
		if on[e.ID] {
			t.Errorf("the store holds %q twice", e.ID)
		}
		on[e.ID] = true
		ids = append(ids, e.ID)
	}
	return seqcheck.NewOrder(all, func(id string) bool { return on[id] }), ids
}

// follower is a subscriber that behaves as an EventSource: when its
// stream ends it opens another with the last id it saw (its position
// block included), on whichever hub it follows now.
type follower struct {
	topic string
	mu    sync.Mutex
	base  string // the URL of the hub it follows
	rec   *seqcheck.Recorder
	ends  int // streams the hub ended
	moved context.CancelFunc
	stop  context.CancelFunc
	done  chan struct{}
}

func follow(t *testing.T, base, topic, lastEventID string) *follower {
	ctx, stop := context.WithCancel(context.Background())
	f := &follower{topic: topic, base: base, rec: seqcheck.NewRecorder(lastEventID), stop: stop, done: make(chan struct{})}
	go f.run(ctx)
	t.Cleanup(f.close)
	return f
}

func (f *follower) close() { f.stop(); <-f.done }

// move makes f follow another hub: it ends its stream and resumes there.
func (f *follower) move(base string) {
	f.mu.Lock()
	f.base = base
	if f.moved != nil {
		f.moved()
	}
	f.mu.Unlock()
}

func (f *follower) lastID() string { return f.rec.Last() }

func (f *follower) result(o seqcheck.Order, until string) seqcheck.Result {
	return f.rec.Check(o, until)
}

func (f *follower) run(ctx context.Context) {
	defer close(f.done)
	for ctx.Err() == nil {
		f.mu.Lock()
		cctx, cancel := context.WithCancel(ctx)
		f.moved = cancel
		base, last := f.base, f.rec.Last()
		f.mu.Unlock()
		if !f.connect(cctx, base, last) {
			select { // refused, or unreachable: try again soon
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		cancel()
	}
}

// connect reads one stream to its end; false if it did not open.
func (f *follower) connect(ctx context.Context, base, last string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/.well-known/mercure?match="+url.QueryEscape(f.topic), nil)
	if err != nil {
		panic(err)
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return false
	}
	f.rec.Read(resp, last)
	if ctx.Err() == nil {
		f.mu.Lock()
		f.ends++
		f.mu.Unlock()
	}
	return true
}

// waitPosition waits until f's first stream has opened and returns its
// position.
func (f *follower) waitPosition(t *testing.T) string {
	t.Helper()
	var pos string
	testwait.For(t, "a stream to open", func() bool {
		if conns := f.rec.Conns(); len(conns) > 0 {
			pos = conns[0].Cursor
		}
		return pos != ""
	})
	return pos
}

// reached waits until every follower's last id is id.
func reached(t *testing.T, id string, fs ...*follower) {
	t.Helper()
	var late *follower
	if !testwait.Within(testwait.Deadline, func() bool {
		for _, f := range fs {
			if f.lastID() != id {
				late = f
				return false
			}
		}
		return true
	}) {
		t.Fatalf("a stream did not get %q within %v: last %q, %d connections", id, testwait.Deadline, late.lastID(), len(late.rec.Conns()))
	}
}

// checkFollowers checks every follower against the store's order up to
// until, and returns the sums.
func checkFollowers(t *testing.T, o seqcheck.Order, until string, fs ...*follower) seqcheck.Result {
	t.Helper()
	var sum seqcheck.Result
	for i, f := range fs {
		r := f.result(o, until)
		if !r.OK() {
			t.Errorf("stream %d: %d lost silently, %d duplicates, %d unknown, %d missing: %q", i,
				r.LostSilently, r.Duplicates, r.Unknown, r.Missing, r.Errors)
		}
		sum.Add(r)
	}
	return sum
}

func testPublishThenOpen(t *testing.T, open func(t *testing.T) store.Store) {
	topic := fmt.Sprintf("https://example.com/cluster/%d", clusterN.Add(1))
	a, b := newClusterHub(t, "a", open(t)), newClusterHub(t, "b", open(t))
	const rounds = 20
	var live int
	for i := range rounds {
		u := fmt.Sprintf("%s/u%d", topic, i)
		if i%2 == 0 {
			a.publish(t, topic, mercure.Update{ID: u, Data: "u"})
		} else {
			resp, err := http.PostForm(a.srv.URL+"/.well-known/mercure", url.Values{"topic": {topic}, "id": {u}, "data": {"u"}})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != u {
				t.Fatalf("POST: %d %q", resp.StatusCode, body)
			}
		}
		same, other := follow(t, a.srv.URL, topic, ""), follow(t, b.srv.URL, topic, "")
		if pos := same.waitPosition(t); pos != u {
			t.Fatalf("round %d: a stream opened on the same hub after the publish returned starts at %q, want %q", i, pos, u)
		}
		other.waitPosition(t)
		m := fmt.Sprintf("%s/m%d", topic, i)
		a.publish(t, topic, mercure.Update{ID: m, Data: "m"})
		reached(t, m, same, other)
		same.close()
		other.close()
		o, _ := storeOrder(t, a.store, topic)
		for who, f := range map[string]*follower{"the same hub": same, "another hub": other} {
			if r := f.result(o, m); !r.OK() || r.Gaps != 0 {
				t.Fatalf("round %d, a stream on %s: %+v", i, who, r)
			}
		}
		if got := other.rec.Conns()[0].IDs; len(got) == 2 {
			live++ // the other hub's feed had not brought u yet: it came live
		}
		if got := same.rec.Conns()[0].IDs; len(got) != 1 || got[0] != m {
			t.Fatalf("round %d: the stream on the same hub got %q, want only %q", i, got, m)
		}
	}
	t.Logf("%d of %d streams opened on another hub right after the publish got the update live", live, rounds)
}

func closedChan(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// lagging is a store handle whose feed a test holds back: while held,
// what the store passes to a listener waits, in order, and is passed on
// all at once when released, as to a hub that fell behind the feed.
type lagging struct {
	store.Store
	mu      sync.Mutex
	cond    *sync.Cond
	held    bool
	pending []func()
	gap     func() // the listener's
	closed  bool
}

// laggingLatest is a lagging handle on a [store.LatestStore].
type laggingLatest struct{ *lagging }

func (l laggingLatest) LatestID() string { return l.Store.(store.LatestStore).LatestID() }

func newLagging(s store.Store) (*lagging, store.Store) {
	l := &lagging{Store: s}
	l.cond = sync.NewCond(&l.mu)
	if _, ok := s.(store.LatestStore); ok {
		return l, laggingLatest{l}
	}
	return l, l
}

func (l *lagging) hold(on bool) {
	l.mu.Lock()
	l.held = on
	l.cond.Broadcast()
	l.mu.Unlock()
}

// release passes what l held back, after a gap report: the hub's
// streams end and resume from history (where the held events are), as
// they do when a hub that fell too far behind drops what it has not
// dispatched.
func (l *lagging) release() {
	l.mu.Lock()
	if l.gap != nil {
		l.pending = append([]func(){l.gap}, l.pending...)
	}
	l.held = false
	l.cond.Broadcast()
	l.mu.Unlock()
}

func (l *lagging) Listen(ln store.Listener) func() {
	queue := func(f func()) {
		l.mu.Lock()
		l.pending = append(l.pending, f)
		l.cond.Broadcast()
		l.mu.Unlock()
	}
	unlisten := l.Store.Listen(store.Listener{
		Event: func(e *store.Event) { queue(func() { ln.Event(e) }) },
		Status: func(err error) {
			if ln.Status != nil {
				queue(func() { ln.Status(err) })
			}
		},
		Gap: func() {
			if ln.Gap != nil {
				queue(ln.Gap)
			}
		},
	})
	if ln.Gap != nil {
		l.mu.Lock()
		l.gap = ln.Gap
		l.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.mu.Lock()
		defer l.mu.Unlock()
		for {
			for !l.closed && (l.held || len(l.pending) == 0) {
				l.cond.Wait()
			}
			if l.closed {
				return
			}
			batch := l.pending
			l.pending = nil
			l.mu.Unlock()
			for _, f := range batch {
				f()
			}
			l.mu.Lock()
		}
	}()
	return func() {
		unlisten()
		l.mu.Lock()
		l.closed = true
		l.cond.Broadcast()
		l.mu.Unlock()
		<-done
	}
}

func testTraffic(t *testing.T, open func(t *testing.T) store.Store) {
	topic := fmt.Sprintf("https://example.com/cluster/%d", clusterN.Add(1))
	const perHub, size = 150, 1024
	lim := mercure.Limits{MaxPendingUpdates: 8, MaxQueuedBytes: 256 << 10, QueueBytes: 64 << 10, MaxBodyBytes: 16 << 10}
	held, heldStore := newLagging(open(t))
	hubs := []*clusterHub{
		newClusterHub(t, "a", open(t)),
		newClusterHub(t, "b", open(t)),
		newClusterHub(t, "c", heldStore, mercure.WithLimits(lim)),
	}
	var fs []*follower
	for i := range 12 {
		fs = append(fs, follow(t, hubs[i%3].srv.URL, topic, ""))
	}
	for _, f := range fs {
		f.waitPosition(t)
	}
	var maxQueued atomic.Int64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			maxQueued.Store(max(maxQueued.Load(), hubs[2].hub.Metrics().QueuedBytes))
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	held.hold(true)
	var published atomic.Int64
	var wg sync.WaitGroup
	data := strings.Repeat("x", size)
	for _, h := range hubs {
		wg.Go(func() {
			for i := range perHub {
				h.publish(t, topic, mercure.Update{ID: fmt.Sprintf("%s/%s%d", topic, h.name, i), Data: data})
				published.Add(1)
				time.Sleep(time.Millisecond) // pacing: the traffic spans the churn below
			}
		})
	}
	// Streams open, move to another hub and close during the traffic;
	// hub c's feed is held back until the other hubs' publishers are
	// done (c's own wait for room meanwhile: c has not dispatched them),
	// then passes what it held at once, faster than c dispatches.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	churn, released := 0, false
	for n := published.Load(); n < 3*perHub && !closedChan(finished); n = published.Load() {
		if n >= 2*perHub && !released {
			held.release()
			released = true
		}
		switch churn % 3 {
		case 0:
			if len(fs) > 60 {
				break
			}
			fs = append(fs, follow(t, hubs[churn%3].srv.URL, topic, ""))
		case 1:
			fs[churn%len(fs)].move(hubs[(churn+1)%3].srv.URL)
		case 2:
			if len(fs) > 60 {
				break
			}
			f := follow(t, hubs[(churn+2)%3].srv.URL, topic, "")
			f.waitPosition(t)
			f.close() // it checks too: what it got before it closed
			fs = append(fs, f)
		}
		churn++
		time.Sleep(20 * time.Millisecond) // pacing of the churn, not a wait
	}
	wg.Wait()
	held.hold(false)
	end := topic + "/end"
	hubs[0].publish(t, topic, mercure.Update{ID: end, Data: "end"})
	var live []*follower
	for _, f := range fs {
		select {
		case <-f.done:
		default:
			live = append(live, f)
		}
	}
	reached(t, end, live...)
	close(stopSampling)
	<-sampled
	for _, f := range live {
		f.close()
	}
	order, ids := storeOrder(t, hubs[0].store, topic)
	if len(ids) != 3*perHub+1 {
		t.Errorf("the store holds %d updates, want the %d acknowledged", len(ids), 3*perHub+1)
	}
	sum := checkFollowers(t, order, "", fs...)
	if r := checkFollowers(t, order, end, live...); r.Missing != 0 {
		t.Errorf("%d updates never reached open streams", r.Missing)
	}
	if q := maxQueued.Load(); q > lim.MaxQueuedBytes {
		t.Errorf("hub c's queues held %d bytes, more than MaxQueuedBytes %d", q, lim.MaxQueuedBytes)
	}
	ends := 0
	for _, f := range fs {
		f.mu.Lock()
		ends += f.ends
		f.mu.Unlock()
	}
	if ends == 0 {
		t.Error("no stream ended at hub c's gap: the case tested no resume")
	}
	t.Logf("%d streams, %d ended by a hub and resumed: %d updates delivered, %d resumes from another cursor (%d updates skipped at them, %d received again), hub c's queues peaked at %d bytes",
		len(fs), ends, sum.Delivered, sum.Gaps, sum.LostWithGap, sum.Redelivered, maxQueued.Load())
}

// testClusterRestart: two hubs, publishers on both sending an update
// again (same id) until a hub acknowledges it, streams on both; the
// server is killed and restarted in the middle. Every acknowledged
// update is recorded once, and every stream gets each once, in the
// store's order, or resumes from history where a hub reported a gap.
func testClusterRestart(t *testing.T, srv *OutageServer) {
	topic := fmt.Sprintf("https://example.com/cluster/%d", clusterN.Add(1))
	hubs := []*clusterHub{newClusterHub(t, "a", srv.Open(t, 0, false)), newClusterHub(t, "b", srv.Open(t, 0, false))}
	var fs []*follower
	for i := range 8 {
		fs = append(fs, follow(t, hubs[i%2].srv.URL, topic, ""))
	}
	for _, f := range fs {
		f.waitPosition(t)
	}
	const perHub = 100
	var published atomic.Int64
	var wg sync.WaitGroup
	for _, h := range hubs {
		wg.Go(func() {
			for i := range perHub {
				h.publish(t, topic, mercure.Update{ID: fmt.Sprintf("%s/%s%d", topic, h.name, i), Data: "x"})
				published.Add(1)
				time.Sleep(2 * time.Millisecond) // pacing: the traffic spans the restart
			}
		})
	}
	testwait.For(t, "a third of the updates", func() bool { return published.Load() >= 2*perHub/3 })
	srv.Kill(t)
	testwait.For(t, "both hubs to report the outage", func() bool {
		return hubs[0].hub.Metrics().FeedError != nil && hubs[1].hub.Metrics().FeedError != nil
	})
	during := published.Load()
	srv.Restart(t)
	wg.Wait()
	t.Logf("%d of %d updates acknowledged before the outage was reported", during, 2*perHub)
	end := topic + "/end"
	hubs[1].publish(t, topic, mercure.Update{ID: end, Data: "end"})
	reached(t, end, fs...)
	for _, f := range fs {
		f.close()
	}
	order, ids := storeOrder(t, hubs[0].store, topic)
	if len(ids) != 2*perHub+1 {
		t.Errorf("the store holds %d updates, want the %d acknowledged", len(ids), 2*perHub+1)
	}
	sum := checkFollowers(t, order, end, fs...)
	t.Logf("%d streams: %d updates delivered, %d resumes from another cursor (%d updates skipped at them)",
		len(fs), sum.Delivered, sum.Gaps, sum.LostWithGap)
}
