package engine

import (
	"context"
	"errors"
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
	e.Published(ev.Seq, ev.ID, len(ev.Bytes))
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

// A stream registers at the last position recorded: its Start.
func TestStreamStart(t *testing.T) {
	e := newEngine(t, nil)
	e.Begin("earliest")
	f := &feeder{e: e}
	s, _ := e.NewStream(newRecorder(), &owner{}, StreamConfig{Client: "c"})
	if err := e.Open(s, []Matcher{exact("x")}); err != nil {
		t.Fatal(err)
	}
	if p := s.Start(); p.ID != "earliest" || p.Seq != 0 {
		t.Fatalf("start %+v before any event", p)
	}
	s.Finish(nil)
	f.push(false, "a", "x")
	s, _ = e.NewStream(newRecorder(), &owner{}, StreamConfig{Client: "c"})
	if err := e.Open(s, []Matcher{exact("x")}); err != nil {
		t.Fatal(err)
	}
	defer s.Finish(nil)
	if p := s.Start(); p.ID != "e1" || p.Seq != 1 {
		t.Fatalf("start %+v after one event", p)
	}
}
