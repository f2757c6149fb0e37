package natsstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

// outageTimeout bounds each call of the outage tests' stores, as
// redisstore's do: what they test is that a store fails within it.
const outageTimeout = time.Second

// dial returns a connection to url, closed when the test ends (after
// the stores on it, which the suites close first), that reconnects
// forever and fast: nats.go tries a server again only after
// ReconnectWait (2 s by default), and gives up after 60 attempts.
func dial(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond),
		nats.ReconnectJitter(0, 0), nats.Timeout(natstest.Patient)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("nats connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// openOn returns a store on the stream name through nc, retried until
// storetest.Deadline: every test opens its stores on a healthy server,
// and a short timeout can run out beside CPU hogs.
func openOn(t *testing.T, nc *nats.Conn, name string, opts ...natsstore.Option) *natsstore.Store {
	t.Helper()
	var s *natsstore.Store
	var err error
	if !storetest.Within(storetest.Deadline, func() bool {
		s, err = natsstore.New(nc, name, opts...)
		return err == nil
	}) {
		t.Fatal(err)
	}
	return s
}

// hostPort is the address of a nats:// URL, for a proxy's target.
func hostPort(url string) string { return strings.TrimPrefix(url, "nats://") }

// TestOutage runs the outage cases shared with the other stores on the
// network: a nats-server of the case's own killed (SIGKILL) and
// restarted with its data, and stores cut off by a proxy from the
// shared server, each case on a stream of its own.
func TestOutage(t *testing.T) {
	t.Parallel()
	storetest.RunOutage(t, func(t *testing.T, restartable bool) *storetest.OutageServer {
		var url, name string
		var srv *natstest.Server
		if restartable {
			srv = natstest.Start(t)
			url, name = srv.URL, "mercure"
		} else {
			url, name = server(t).URL, streamName()
		}
		p := storetest.StartProxy(t, hostPort(url), nil)
		o := &storetest.OutageServer{
			Open: func(t *testing.T, keep int, cut bool) store.Store {
				to := url
				if cut {
					to = "nats://" + p.Addr()
				}
				opts := []natsstore.Option{natsstore.WithTimeout(outageTimeout)}
				if keep > 0 {
					opts = append(opts, natsstore.WithMaxLen(int64(keep)))
				}
				return openOn(t, dial(t, to), name, opts...)
			},
			Cut: p.Cut, Mend: p.Mend, LoseReply: p.LoseReply, Timeout: outageTimeout,
		}
		if srv != nil {
			o.Kill = func(*testing.T) { srv.Kill() }
			o.Restart = func(t *testing.T) { srv.Restart(t) }
		}
		return o
	})
}

// A cut connection is reported as soon as the feed sees it, not once a
// call of the store's timeout has run out: with a timeout of a minute,
// the report comes within storetest.Deadline. And back as soon as the
// link is.
func TestFeedReportsACutAtOnce(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	p := storetest.StartProxy(t, hostPort(url), nil)
	s := openOn(t, dial(t, "nats://"+p.Addr()), name, natsstore.WithTimeout(time.Minute))
	t.Cleanup(func() { s.Close() })
	f := listen(t, s)
	f.wantEvents(t)
	p.Cut()
	f.wantStatus(t, true, storetest.Deadline)
	p.Mend(t)
	f.wantStatus(t, false, storetest.Deadline)
	f.wantEvents(t)
}

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
// them. The feed passes the stream's messages in order, each once, and
// the marker is appended after every event appended before wantEvents:
// an extra event (one recorded or passed twice) would come before it.
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

// TestFeedReconnects cuts the feed's connection again and again while
// another store appends: the listener gets every event once, in order,
// without a gap or a repeat, and each outage is reported.
func TestFeedReconnects(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	p := storetest.StartProxy(t, hostPort(url), nil)
	cut := openOn(t, dial(t, "nats://"+p.Addr()), name, natsstore.WithTimeout(outageTimeout))
	direct := openOn(t, dial(t, url), name, natsstore.WithTimeout(outageTimeout))
	t.Cleanup(func() { cut.Close(); direct.Close() })
	var mu sync.Mutex
	var events []string
	var downs atomic.Int64
	passed := func() int { mu.Lock(); defer mu.Unlock(); return len(events) }
	t.Cleanup(cut.Listen(store.Listener{
		Event: func(e *store.Event) { mu.Lock(); events = append(events, e.ID); mu.Unlock() },
		Gap:   func() { mu.Lock(); events = append(events, "GAP"); mu.Unlock() },
		Status: func(err error) {
			if err != nil {
				downs.Add(1)
			}
		},
	}))
	const rounds, perRound = 4, 100
	var want []string
	for round := range rounds {
		// The link is cut while the round's events flow: once the feed
		// passed one of them (maybe all: the cut then comes after).
		before := passed()
		appended := make(chan struct{})
		go func() {
			defer close(appended)
			for i := range perRound {
				id := fmt.Sprint("r", round, "-", i)
				storetest.MustAppend(t, direct, storetest.NewEvent(id))
			}
		}()
		for i := range perRound {
			want = append(want, fmt.Sprint("r", round, "-", i))
		}
		storetest.WaitFor(t, fmt.Sprint("the feed to pass round ", round, "'s first event"), func() bool { return passed() > before })
		p.Cut()
		storetest.WaitFor(t, fmt.Sprint("outage ", round+1, " to be reported"), func() bool { return downs.Load() > int64(round) })
		p.Mend(t)
		<-appended
	}
	// One more, after which nothing may come: a repeat would come before.
	storetest.MustAppend(t, direct, storetest.NewEvent("end"))
	want = append(want, "end")
	storetest.WaitFor(t, "the end", func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(events, "end") })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(events, want) {
		t.Fatalf("the feed passed %d events, want %d once, in order, without a gap: %q", len(events), len(want), events)
	}
}

// An append that failed during an outage can be recorded long after:
// nats.go keeps what is published while it reconnects, and sends it on
// reconnecting. The first attempt here was accepted an hour ago (its
// Time) and recorded now; the publisher's retry, now, is recognised:
// the retry window runs from when the stream recorded the first, as
// store.Store.Append says, not from when the hub accepted it.
func TestRetryOfAnAppendRecordedLate(t *testing.T) {
	t.Parallel()
	s := open(t, server(t).URL, streamName())
	t.Cleanup(func() { s.Close() })
	first := storetest.NewEvent("late")
	first.Time = time.Now().Add(-time.Hour)
	storetest.MustAppend(t, s, first)
	retry := storetest.RetryOf(first)
	storetest.MustAppend(t, s, retry)
	if retry.Seq != first.Seq {
		t.Fatalf("the retry got Seq %d, the first attempt %d: recorded twice", retry.Seq, first.Seq)
	}
}

// TestHungServer pauses the server (it answers nothing, and closes no
// connection, as a hung process or a network that drops packets: nats.go
// notices only by its pings, every two minutes by default): Append fails
// within a few timeouts, the feed reports the outage (its check each
// second goes unanswered), Close returns promptly, and all recovers when
// the server does.
func TestHungServer(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	const timeout = 500 * time.Millisecond
	bound := 3*timeout + 2*time.Second // as storetest's outage cases bound what must fail
	s := openOn(t, dial(t, srv.URL), "m", natsstore.WithTimeout(timeout))
	f := listen(t, s)
	f.wantEvents(t)
	srv.Pause(t)
	start := time.Now()
	if err := s.Append(context.Background(), storetest.NewEvent("x")); err == nil {
		t.Fatal("Append succeeded on a paused server")
	}
	if d := time.Since(start); d > bound {
		t.Fatalf("Append took %v to fail with WithTimeout(%v)", d, timeout)
	}
	f.wantStatus(t, true, storetest.Deadline)
	srv.Resume(t)
	f.wantStatus(t, false, storetest.Deadline)
	f.wantEvents(t)

	srv.Pause(t)
	defer srv.Resume(t)
	start = time.Now()
	s.Close()
	if d := time.Since(start); d > bound {
		t.Fatalf("Close took %v on a paused server with WithTimeout(%v)", d, timeout)
	}
}
