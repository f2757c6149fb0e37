package natsstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

// history records what a store's feed passes to a listener, rewinds and
// gaps included, in order.
type history struct {
	mu  sync.Mutex
	got []string
}

func listenAll(t *testing.T, s store.Store) *history {
	h := &history{}
	add := func(v string) { h.mu.Lock(); h.got = append(h.got, v); h.mu.Unlock() }
	t.Cleanup(s.Listen(store.Listener{
		Event:   func(e *store.Event) { add(e.ID) },
		Gap:     func() { add("gap") },
		Rewound: func(head uint64, id string) { add(fmt.Sprintf("rewound:%d:%s", head, id)) },
	}))
	return h
}

func (h *history) entries() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// waitFor waits until the listener got want last, and returns what it
// got.
func (h *history) waitFor(t *testing.T, want string) []string {
	t.Helper()
	var got []string
	if !storetest.Within(storetest.Deadline, func() bool {
		got = h.entries()
		return len(got) > 0 && got[len(got)-1] == want
	}) {
		t.Fatalf("the feed passed %q, want %q last", got, want)
	}
	return got
}

// want checks that the listener got exactly want, once it got want's
// last.
func (h *history) want(t *testing.T, want ...string) {
	t.Helper()
	if got := h.waitFor(t, want[len(want)-1]); !slices.Equal(got, want) {
		t.Fatalf("the feed passed %q, want %q", got, want)
	}
}

// A server restarted without its data rewinds the history: the feed
// tells its listeners before the first event of the new one, and the
// store's latest id follows. The stream is gone with the data: the
// store creates it again.
func TestFeedRewindsWhenTheServerLosesItsData(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := openOn(t, dial(t, srv.URL), "rewind", natsstore.WithTimeout(outageTimeout))
	t.Cleanup(func() { s.Close() })
	h := listenAll(t, s)
	b := storetest.NewEvent("b")
	storetest.MustAppend(t, s, storetest.NewEvent("a"))
	storetest.MustAppend(t, s, b)
	h.waitFor(t, "b")
	srv.Kill()
	srv.Wipe(t)
	srv.Restart(t)
	storetest.MustAppend(t, s, storetest.NewEvent("c"))
	h.want(t, "a", "b", "rewound:0:earliest", "c")
	if id := s.LatestID(); id != "c" {
		t.Fatalf("LatestID %q, want c", id)
	}
	// b vanished, and its publisher sends it again: a client that got b
	// and resumes with it must not resume after b's retry, which would
	// skip c. b is an unknown cursor: the backlog holds every event.
	retry := *b
	retry.Seq = 0
	storetest.MustAppend(t, s, &retry)
	backlog, err := s.Replay(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if backlog.Cursor != store.Earliest {
		t.Fatalf("a replay from b, which vanished, starts at %q, want %q", backlog.Cursor, store.Earliest)
	}
	h.want(t, "a", "b", "rewound:0:earliest", "c", "b")
}

// The new history grows past the old position before the feed notices
// (it is cut off meanwhile): the sequence it last passed is held again,
// by another event, which the feed tells from its own by its id and
// time.
func TestFeedRewindsPastTheOldPosition(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	p := storetest.StartProxy(t, hostPort(srv.URL), nil)
	cut := openOn(t, dial(t, "nats://"+p.Addr()), "rewind", natsstore.WithTimeout(outageTimeout))
	direct := openOn(t, dial(t, srv.URL), "rewind", natsstore.WithTimeout(outageTimeout))
	t.Cleanup(func() { cut.Close(); direct.Close() })
	h := listenAll(t, cut)
	storetest.MustAppend(t, direct, storetest.NewEvent("a"))
	storetest.MustAppend(t, direct, storetest.NewEvent("b"))
	h.waitFor(t, "b")
	p.Cut()
	srv.Kill()
	srv.Wipe(t)
	srv.Restart(t)
	for _, id := range []string{"c", "d", "e"} { // d at b's sequence
		storetest.MustAppend(t, direct, storetest.NewEvent(id))
	}
	p.Mend(t)
	h.want(t, "a", "b", "rewound:0:earliest", "c", "d", "e")
	if id := cut.LatestID(); id != "e" {
		t.Fatalf("LatestID %q, want e", id)
	}
}

// A history that lost its last events, but holds the first ones (a
// stream created again with a copy of them): the feed rewinds to the
// last event it shares with what the feed passed, and goes on from
// there.
func TestFeedRewindsToTheSharedHead(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	p := storetest.StartProxy(t, hostPort(url), nil)
	cut := openOn(t, dial(t, "nats://"+p.Addr()), name, natsstore.WithTimeout(outageTimeout))
	direct := openOn(t, dial(t, url), name, natsstore.WithTimeout(outageTimeout))
	t.Cleanup(func() { cut.Close(); direct.Close() })
	h := listenAll(t, cut)
	a := storetest.NewEvent("a")
	storetest.MustAppend(t, direct, a)
	storetest.MustAppend(t, direct, storetest.NewEvent("b"))
	storetest.MustAppend(t, direct, storetest.NewEvent("c"))
	h.waitFor(t, "c")
	p.Cut()
	// The new history: a, as it was, then x at b's sequence.
	admin := dial(t, url)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.GetMsg(ctx, a.Seq)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if err := js.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: first.Subject, Header: first.Header, Data: first.Data}); err != nil {
		t.Fatal(err)
	}
	storetest.MustAppend(t, direct, storetest.NewEvent("x"))
	p.Mend(t)
	h.want(t, "a", "b", "c", fmt.Sprintf("rewound:%d:a", a.Seq), "x")
	if id := cut.LatestID(); id != "x" {
		t.Fatalf("LatestID %q, want x", id)
	}
}
