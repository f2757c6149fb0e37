package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/testwait"
)

// Updates from other hubs (the store's feed) are bounded: past twice
// MaxPendingUpdates waiting for a dispatcher that is behind, the engine
// drops them and reports a gap, so that its streams resume from history;
// and they never hold this hub's own publishers back.
func TestRemoteFeedIsBounded(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Limits.MaxPendingUpdates = 4 })
	f := &feeder{e: e}
	o, release := holding()
	defer release()
	_, stopHeld := serve(t, e, o, exact("held"))
	defer stopHeld()
	w, stop := serve(t, e, nil, exact("x"))
	defer stop()
	f.push(true, "holds the dispatcher", "held")
	<-o.held
	// Other hubs' updates pile up behind the held dispatch (eight in all
	// with it): they do not make this hub's publishers wait.
	for range 7 {
		f.push(false, "remote", "x")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := e.WaitRoom(ctx); err != nil {
		t.Fatalf("a publisher waits for other hubs' updates: %v", err)
	}
	if g := e.Counters().FeedGaps.Load(); g != 0 {
		t.Fatalf("%d gaps within the bound", g)
	}
	f.push(false, "one too many", "x")
	if g := e.Counters().FeedGaps.Load(); g != 1 {
		t.Fatalf("%d gaps past the bound, want 1", g)
	}
	release()
	if err := e.WaitDispatched(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The stream ends without the dropped updates: its client resumes
	// from history, where they are.
	testwait.For(t, "the stream to end for the gap", func() bool {
		return e.Counters().StreamsClosed[EndHistoryGap].Load() >= 1
	})
	if got := w.String(); strings.Contains(got, "remote") {
		t.Fatalf("the stream got dropped updates live: %q", got)
	}
	if e.feed.pending != 0 || e.feed.pendingBytes != 0 {
		t.Fatalf("%d updates, %d bytes still counted pending", e.feed.pending, e.feed.pendingBytes)
	}
}

// This hub's own updates hold its publishers back past
// MaxPendingUpdates, as long as the dispatcher is behind; other hubs'
// updates do not count.
func TestOwnUpdatesHoldPublishersBack(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Limits.MaxPendingUpdates = 2 })
	f := &feeder{e: e}
	o, release := holding()
	defer release()
	_, stopHeld := serve(t, e, o, exact("held"))
	defer stopHeld()
	f.publish(true, "holds the dispatcher", "held")
	<-o.held
	f.push(false, "remote", "x")
	if err := e.WaitRoom(context.Background()); err != nil {
		t.Fatal(err) // one own update pending, one remote: room
	}
	f.publish(false, "own", "x")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.WaitRoom(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRoom with two own updates pending: %v, want a wait", err)
	}
	release()
	if err := e.WaitRoom(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Once Published says an update is recorded, a stream that opens does
// not get it live, though the store's feed brings it only later (a store
// on the network); the stream starts from its position.
func TestPublishedBeforeTheFeed(t *testing.T) {
	e := newEngine(t, nil)
	f := &feeder{e: e}
	before, stopBefore := serve(t, e, nil, exact("x"))
	defer stopBefore()
	ev := &Event{Seq: 1, ID: "u", Topics: []string{"x"}, Bytes: []byte("id: u\ndata: u\n\n")}
	e.Published(ev.Seq, ev.ID, ev.Topics, len(ev.Bytes))
	after, stopAfter := serve(t, e, nil, exact("x"))
	defer stopAfter()
	f.seq = 1
	e.Push(ev) // the feed, late
	f.push(false, "next", "x")
	testwait.For(t, "the first stream to get both", func() bool { n, _ := before.state(); return n == 2 })
	testwait.For(t, "the second to get the next", func() bool { n, _ := after.state(); return n == 1 })
	if got := after.String(); strings.Contains(got, "data: u\n") {
		t.Fatalf("a stream opened after Published got the update live: %q", got)
	}
	if p := e.Last(); p.Seq != 2 {
		t.Fatalf("last position %+v, want seq 2", p)
	}
}

// A stream registers at the last position recorded: the position block
// it starts with, and the start its replay is given.
func TestStreamStart(t *testing.T) {
	e := newEngine(t, nil)
	e.Begin("earliest")
	f := &feeder{e: e}
	for _, want := range []Position{{ID: "earliest"}, {ID: "e1", Seq: 1}} {
		if want.Seq > 0 {
			f.push(false, "a", "x")
		}
		w := newRecorder()
		ctx, cancel := context.WithCancel(context.Background())
		var got Position
		err := e.Serve(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), Spec{
			Owner: &owner{}, Client: "c", Matchers: []Matcher{exact("x")},
			Replay:  func(rp *Replay) (uint64, bool) { got = rp.Start(); return 0, true },
			Started: cancel, // the client leaves at once
		})
		if err != nil || got != want {
			t.Fatalf("replay's start %+v (%v), want %+v", got, err, want)
		}
		w = newRecorder()
		ctx, cancel = context.WithCancel(context.Background())
		if err := e.Serve(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), Spec{
			Owner: &owner{}, Client: "c", Matchers: []Matcher{exact("x")}, Started: cancel,
		}); err != nil || w.String() != "id: "+want.ID+"\n\n" {
			t.Fatalf("without a replay: %q (%v), want the position block of %+v", w.String(), err, want)
		}
	}
}

// A rewind of the store's history (a failover to a replica that lacked
// events the feed passed on) ends every open stream as a gap does, moves
// the engine's position back, so that a stream opened after it gets the
// events that follow live though their Seqs were seen before, and
// forgets this hub's own updates that went with the old history, which
// would otherwise hold its publishers back.
func TestRewind(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Limits.MaxPendingUpdates = 1 })
	f := &feeder{e: e}
	before, stopBefore := serve(t, e, nil, exact("x"))
	defer stopBefore()
	f.push(false, "kept", "x")
	f.push(false, "lost", "x")
	e.Published(3, "mine", nil, 10) // recorded by the old primary, never fed
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.WaitRoom(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRoom with an own update pending: %v, want a wait", err)
	}
	e.Rewind(Position{Seq: 1, ID: "e1"})
	if p := e.Last(); p != (Position{Seq: 1, ID: "e1"}) {
		t.Fatalf("last position %+v after the rewind, want e1's", p)
	}
	// A stream that registers before the dispatcher reaches the rewind
	// ends with the others; this one registers after.
	if err := e.WaitDispatched(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, stopAfter := serve(t, e, nil, exact("x"))
	defer stopAfter()
	f.seq = 1
	f.push(false, "new", "x") // Seq 2 again
	testwait.For(t, "the stream open before the rewind to end", func() bool {
		return e.Counters().StreamsClosed[EndHistoryGap].Load() >= 1
	})
	testwait.For(t, "the stream opened after it to get the new event", func() bool { n, _ := after.state(); return n == 1 })
	if got := before.String(); strings.Contains(got, "data: new\n") {
		t.Fatalf("the stream open before the rewind got an event after it: %q", got)
	}
	ctx, cancel = context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := e.WaitRoom(ctx); err != nil {
		t.Fatalf("WaitRoom after the rewind: %v: the lost own update still counts", err)
	}
}
