package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/testwait"
)

// change is one call of a Want, with the exact subscriptions that the
// index held when it came.
type change struct {
	all         bool
	add, remove []string
	registered  int
}

// wantLog records the changes of the streams' interest.
type wantLog struct {
	e  *Engine
	mu sync.Mutex
	cs []change
}

func (l *wantLog) want(all bool, add, remove []string) {
	l.e.mu.Lock()
	n, _, _ := l.e.index.Len()
	l.e.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(add)
	slices.Sort(remove)
	l.cs = append(l.cs, change{all, add, remove, n})
}

func (l *wantLog) changes() []change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.cs)
}

// The store is told of the exact topics of the open streams and of the
// hub's own, of everything while a stream has another matcher, once per
// topic gained, before the stream that gains it registers (so that the
// stream's start position is at or after the feed's position when the
// store took the topic), and lazily, in one change, of what no stream
// needs any more.
func TestInterestFollowsStreams(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.InterestLinger = 10 * time.Millisecond })
	log := &wantLog{e: e}
	e.FollowInterest(log.want, []string{"own"})
	expect := func(what string, n int, want change) {
		t.Helper()
		cs := log.changes()
		if len(cs) != n {
			t.Fatalf("%s: %d changes %+v, want %d", what, len(cs), cs, n)
		}
		if got := cs[n-1]; got.all != want.all || !slices.Equal(got.add, want.add) || !slices.Equal(got.remove, want.remove) || got.registered != want.registered {
			t.Fatalf("%s: change %+v, want %+v", what, got, want)
		}
	}
	expect("start", 1, change{add: []string{"own"}})

	_, stop1 := serve(t, e, nil, exact("a"))
	expect("a stream on a", 2, change{add: []string{"a"}, registered: 0})
	_, stop2 := serve(t, e, nil, exact("a"))
	expect("another on a", 2, change{add: []string{"a"}})
	_, stop3 := serve(t, e, nil, exact("b"), exact("c"), exact("a"))
	expect("a stream on b, c and a", 3, change{add: []string{"b", "c"}, registered: 2})
	_, stop4 := serve(t, e, nil, exact("d"), pattern(t, "https://example.com/{x}"))
	expect("a stream with a pattern", 5, change{all: true, add: []string{"d"}, registered: 5})
	if c := log.changes()[3]; !c.all || len(c.add) > 0 || c.registered != 5 {
		t.Fatalf("a pattern: change %+v, want everything before the stream registers", c)
	}
	if !e.Reads([]string{"z"}) {
		t.Fatal("the store reads everything: Reads(z) is false")
	}

	stop4()
	testwait.For(t, "everything, then d, dropped", func() bool { return len(log.changes()) == 6 })
	expect("the pattern's stream gone", 6, change{remove: []string{"d"}, registered: 5})
	if e.Reads([]string{"z"}) || !e.Reads([]string{"z", "b"}) || !e.Reads([]string{"own"}) {
		t.Fatal("Reads does not follow the topics told")
	}
	stop1()
	stop3()
	testwait.For(t, "b and c dropped", func() bool { return len(log.changes()) == 7 })
	expect("b and c gone, a kept", 7, change{remove: []string{"b", "c"}, registered: 1})
	stop2()
	testwait.For(t, "a dropped", func() bool { return len(log.changes()) == 8 })
	expect("a gone", 8, change{remove: []string{"a"}})
	if all, topics, _ := e.Interest(); all || !slices.Equal(topics, []string{"own"}) {
		t.Fatalf("interest %v %v, want own alone", all, topics)
	}
}

// A topic whose last stream goes and whose next comes within the linger
// costs the store no change.
func TestInterestLingers(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.InterestLinger = time.Hour })
	log := &wantLog{e: e}
	e.FollowInterest(log.want, nil)
	_, stop := serve(t, e, nil, exact("a"))
	stop()
	_, stop = serve(t, e, nil, exact("a"))
	defer stop()
	if n := len(log.changes()); n != 2 {
		t.Fatalf("%d changes, want 2: the start and a", n)
	}
}

// This hub's own updates on topics that the store's feed does not read
// never come back through it: they must not hold its publishers back.
func TestOwnUpdatesTheFeedDoesNotRead(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Limits.MaxPendingUpdates = 1 })
	e.FollowInterest(func(bool, []string, []string) {}, []string{"own"})
	for seq := uint64(1); seq <= 3; seq++ {
		e.Published(seq, "x", []string{"unread"}, 10)
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
		err := e.WaitRoom(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %d updates on a topic not read: %v", seq, err)
		}
	}
	e.Published(4, "y", []string{"own"}, 10) // it does come back: it counts
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.WaitRoom(ctx); err == nil {
		t.Fatal("an update on a topic read, not dispatched yet, does not hold the publishers back")
	}
}
