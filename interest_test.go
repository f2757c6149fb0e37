package mercure_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/store"
)

// filtering is a store.InterestStore over a memory store: it passes its
// listener exactly the events of the interest it was told, and records
// that interest.
type filtering struct {
	store.Store
	mu     sync.Mutex
	told   bool // a change came
	all    bool
	topics map[string]bool
}

func (f *filtering) ListenInterest(l store.Listener) (func(store.Interest), func()) {
	f.all = true
	inner := l
	inner.Event = func(e *store.Event) {
		f.mu.Lock()
		pass := f.all || slices.ContainsFunc(e.Topics, func(t string) bool { return f.topics[t] })
		f.mu.Unlock()
		if pass {
			l.Event(e)
		}
	}
	cancel := f.Listen(inner)
	return func(in store.Interest) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.told = true
		f.all = in.All
		for _, t := range in.Add {
			f.topics[t] = true
		}
		for _, t := range in.Remove {
			delete(f.topics, t)
		}
	}, cancel
}

// interest returns what the store was told: everything, or the topics.
func (f *filtering) interest() (all bool, topics []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t := range f.topics {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return f.all, topics
}

// A hub on a store.InterestStore tells it, whatever the store, that it
// needs its EndStreams instructions, then the exact topics of its
// streams before they answer, and everything while one has a URL
// pattern; its streams get their updates; its own updates on topics that
// the store leaves out do not hold its publishers back.
func TestHubTellsItsInterest(t *testing.T) {
	fs := &filtering{Store: newMemoryStore(t, 100), topics: map[string]bool{}}
	th := newTestHub(t, mercure.WithStore(fs), mercure.WithAnonymousSubscribers(),
		mercure.WithLimits(mercure.Limits{MaxPendingUpdates: 2}), mercure.WithInterestLinger(10*time.Millisecond))
	endStreams := th.URL() + "/streams/end"
	expect := func(what string, wantAll bool, want ...string) {
		t.Helper()
		if all, topics := fs.interest(); all != wantAll || !slices.Equal(topics, want) {
			t.Fatalf("%s: the store was told all=%v %v, want all=%v %v", what, all, topics, wantAll, want)
		}
	}
	expect("no stream", false, endStreams)

	a, b := "https://example.com/a", "https://example.com/b"
	s := th.subscribe("match=" + url.QueryEscape(a) + "&match=" + url.QueryEscape(b))
	expect("a stream on a and b", false, endStreams, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	for i := range 5 { // past MaxPendingUpdates: none would come back to make room
		if _, err := th.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/unread"}, Data: fmt.Sprint(i)}); err != nil {
			t.Fatalf("update %d on a topic the store leaves out: %v", i, err)
		}
	}
	th.mustPost("topic=" + url.QueryEscape(b) + "&data=for-b")
	if ev := s.next(t); ev.Data != "for-b" {
		t.Fatalf("the stream got %q, want for-b", ev.Data)
	}

	p := th.subscribe("match_urlpattern=" + url.QueryEscape("https://example.com/:x"))
	expect("a stream with a pattern", true, endStreams, a, b)
	th.mustPost("topic=" + url.QueryEscape("https://example.com/c") + "&data=for-c")
	if ev := p.next(t); ev.Data != "for-c" {
		t.Fatalf("the pattern's stream got %q, want for-c", ev.Data)
	}
	p.close()
	s.close()
	testwait.For(t, "the interest back to the hub's own, after the linger", func() bool {
		all, topics := fs.interest()
		return !all && slices.Equal(topics, []string{endStreams})
	})
}
