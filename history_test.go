package mercure_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
)

// publishIDs publishes one update per id on topic, in order.
func (th *testHub) publishIDs(topic string, ids ...string) {
	th.t.Helper()
	for _, id := range ids {
		th.mustPost("topic=" + url.QueryEscape(topic) + "&id=" + url.QueryEscape(id) + "&data=" + url.QueryEscape(id))
	}
}

// ids reads n events and returns their ids.
func (s *subscription) ids(t testing.TB, n int) []string {
	t.Helper()
	var got []string
	for range n {
		got = append(got, s.next(t).ID)
	}
	return got
}

const bookTopic = "https://example.com/books/1"

func TestREC1_EveryEventHasAnID(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=" + url.QueryEscape(bookTopic))
	id := th.mustPost("topic=" + url.QueryEscape(bookTopic))
	if ev := s.next(t); ev.ID == "" || ev.ID != id {
		t.Fatalf("event id %q, publish answered %q", ev.ID, id)
	}
}

func TestREC4_ReplayThenLive(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	th.publishIDs(bookTopic, "e1", "e2", "e3")
	th.publishIDs("https://example.com/other", "o1") // not matched: never replayed
	s := th.subscribe("match="+url.QueryEscape(bookTopic), "Last-Event-ID", "e1")
	th.publishIDs(bookTopic, "e4")
	if got := strings.Join(s.ids(t, 3), " "); got != "e2 e3 e4" {
		t.Fatalf("got %s, want e2 e3 e4", got)
	}
}

func TestREC3_CursorPrecedence(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	th.publishIDs(bookTopic, "h", "q", "b", "last")
	match := "match=" + url.QueryEscape(bookTopic)
	cases := []struct {
		name, query, body string
		header            []string
		want              string
	}{
		{"header beats query and body", match + "&last_event_id=q", "last_event_id=b", []string{"Last-Event-ID", "h"}, "h"},
		{"query beats body", match + "&last_event_id=q", "last_event_id=b", nil, "q"},
		{"body alone", match, "last_event_id=b", nil, "b"},
		{"first query value wins", match + "&last_event_id=q&last_event_id=b", "", nil, "q"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := http.MethodGet
			if c.body != "" {
				method = "QUERY"
			}
			s, res := th.trySubscribe(method, c.query, c.body, c.header...)
			if s == nil {
				t.Fatalf("status %d", res.StatusCode)
			}
			if got := s.header("Mercure-Last-Event-ID"); got != c.want {
				t.Fatalf("Mercure-Last-Event-ID %q, want %q", got, c.want)
			}
		})
	}
}

func TestREC6_Earliest(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	th.publishIDs(bookTopic, "e1", "e2")
	s := th.subscribe("match=" + url.QueryEscape(bookTopic) + "&last_event_id=earliest")
	if got := s.header("Mercure-Last-Event-ID"); got != "earliest" {
		t.Fatalf("Mercure-Last-Event-ID %q", got)
	}
	if got := strings.Join(s.ids(t, 2), " "); got != "e1 e2" {
		t.Fatalf("got %s", got)
	}
}

func TestREC7_DuplicateIDsResolveToOldest(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	th.publishIDs(bookTopic, "a", "x", "b")
	// Another update with the id x: recorded, not taken for a retry.
	th.mustPost("topic=" + url.QueryEscape(bookTopic) + "&id=x&data=second")
	th.publishIDs(bookTopic, "c")
	s := th.subscribe("match="+url.QueryEscape(bookTopic), "Last-Event-ID", "x")
	if got := strings.Join(s.ids(t, 3), " "); got != "b x c" {
		t.Fatalf("got %s, want b x c", got)
	}
}

func TestREC9_MercureLastEventIDHeader(t *testing.T) {
	t.Parallel()
	match := "match=" + url.QueryEscape(bookTopic)
	t.Run("known cursor", func(t *testing.T) {
		th := newTestHub(t)
		th.publishIDs(bookTopic, "e1", "e2", "e3")
		s := th.subscribe(match, "Last-Event-ID", "e1")
		if got := s.header("Mercure-Last-Event-ID"); got != "e1" {
			t.Fatalf("header %q, want e1", got)
		}
		if got := strings.Join(s.ids(t, 2), " "); got != "e2 e3" {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("unknown cursor replays what is retained", func(t *testing.T) {
		th := newTestHub(t)
		th.publishIDs(bookTopic, "e1", "e2")
		s := th.subscribe(match + "&last_event_id=zz")
		if got := s.header("Mercure-Last-Event-ID"); got != "earliest" {
			t.Fatalf("header %q, want earliest", got)
		}
		if got := strings.Join(s.ids(t, 2), " "); got != "e1 e2" {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("empty history", func(t *testing.T) {
		th := newTestHub(t)
		s := th.subscribe(match, "Last-Event-ID", "e1")
		if got := s.header("Mercure-Last-Event-ID"); got != "earliest" {
			t.Fatalf("header %q, want earliest", got)
		}
	})
	t.Run("dropped cursor", func(t *testing.T) {
		th := newTestHub(t, withHistory(t, 2))
		th.publishIDs(bookTopic, "e1", "e2", "e3")
		s := th.subscribe(match, "Last-Event-ID", "e1")
		if got := s.header("Mercure-Last-Event-ID"); got != "earliest" {
			t.Fatalf("header %q, want earliest", got)
		}
		if got := strings.Join(s.ids(t, 2), " "); got != "e2 e3" {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("no history kept", func(t *testing.T) {
		th := newTestHub(t, withHistory(t, 0))
		th.publishIDs(bookTopic, "e1")
		s := th.subscribe(match, "Last-Event-ID", "e1")
		if got := s.header("Mercure-Last-Event-ID"); got != "earliest" {
			t.Fatalf("header %q, want earliest", got)
		}
		th.publishIDs(bookTopic, "e2")
		if got := s.next(t).ID; got != "e2" {
			t.Fatalf("got %s, want the live e2", got)
		}
	})
	t.Run("absent without cursor", func(t *testing.T) {
		th := newTestHub(t)
		th.publishIDs(bookTopic, "e1")
		s := th.subscribe(match)
		if _, ok := s.res.Header["Mercure-Last-Event-Id"]; ok {
			t.Fatal("Mercure-Last-Event-ID sent though no cursor was")
		}
	})
}

func TestREC13_HubLastEventID(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	if got := th.LastEventID(); got != "earliest" {
		t.Fatalf("LastEventID %q before any publish", got)
	}
	th.publishIDs(bookTopic, "e1", "e2")
	if got := th.LastEventID(); got != "e2" {
		t.Fatalf("LastEventID %q, want e2", got)
	}
}

// TestREC4_SeamHasNoGapNorDuplicate subscribes with cursors while a
// publisher sends thousands of updates: every subscriber must see exactly
// the sequence that follows its cursor, across the replay→live seam.
func TestREC4_SeamHasNoGapNorDuplicate(t *testing.T) {
	t.Parallel()
	const total = 4000
	// Publishing here outruns the streams (more so on a loaded machine):
	// queues that hold every update keep overflow, which ends a stream on
	// purpose, out of a test of the seam.
	th := newTestHub(t, withHistory(t, total), mercure.WithLimits(mercure.Limits{QueueEvents: 2 * total}))
	match := "match=" + url.QueryEscape(bookTopic)

	var wg sync.WaitGroup
	subscribers := 0
	for i := range total {
		if _, err := th.Publish(context.Background(), mercure.Update{
			Topics: []string{bookTopic}, ID: "u" + strconv.Itoa(i), Data: strconv.Itoa(i),
		}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			time.Sleep(50 * time.Microsecond) // let subscribers connect mid-stream
		}
		if i%200 != 100 {
			continue
		}
		// Subscribe with a cursor some updates back while publishing goes on.
		cursor := i - 1 - subscribers*7%100
		subscribers++
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, res := th.trySubscribe(http.MethodGet, match, "", "Last-Event-ID", "u"+strconv.Itoa(cursor))
			if s == nil {
				t.Errorf("cursor u%d: status %d", cursor, res.StatusCode)
				return
			}
			for want := cursor + 1; want < total; want++ {
				ev, ok := s.tryNext(t)
				if !ok {
					return
				}
				if ev.ID != "u"+strconv.Itoa(want) {
					t.Errorf("cursor u%d: got %s, want u%d", cursor, ev.ID, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := th.Metrics().Overflows; n != 0 {
		t.Errorf("%d streams overflowed", n)
	}
}

// copyingStore hands out fresh copies of its events, as a store that
// decodes them from a database or the network does.
type copyingStore struct{ *memstore.Store }

func (c copyingStore) Replay(ctx context.Context, id string) (store.Backlog, error) {
	b, err := c.Store.Replay(ctx, id)
	events := b.Events
	b.Events = func(yield func(*store.Event, error) bool) {
		for e, err := range events {
			var c *store.Event
			if e != nil {
				copied := *e
				c = &copied
			}
			if !yield(c, err) {
				return
			}
		}
	}
	return b, err
}

func TestREC4_ReplayFromAnotherStore(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithStore(copyingStore{newMemoryStore(t, 100)}))
	th.mustPost("topic=x&data=hello")
	s := th.subscribe("match=x&last_event_id=earliest")
	th.mustPost("topic=x&data=live")
	for _, want := range []string{"hello", "live"} {
		if ev := s.next(t); ev.Data != want {
			t.Fatalf("got %q, want %q", ev.Data, want)
		}
	}
}

// laggingStore delivers events to listeners only when the test says so, as
// a store shared over the network delivers them after Append returns.
type laggingStore struct {
	*memstore.Store
	release chan struct{} // each receive lets one event through
}

func (l laggingStore) Listen(ls store.Listener) func() {
	pending := make(chan *store.Event, 100)
	cancel := l.Store.Listen(store.Listener{Event: func(e *store.Event) { pending <- e }})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-l.release:
				ls.Event(<-pending)
			case <-stop:
				return
			}
		}
	}()
	return func() { cancel(); close(stop); <-done }
}

// A live feed that lags behind Append must not repeat what the replay sent
// or what precedes the cursor (REC-4): the store's Head marks what the
// replay covered.
func TestREC4_LaggingFeedRepeatsNothing(t *testing.T) {
	t.Parallel()
	st := laggingStore{newMemoryStore(t, 100), make(chan struct{})}
	th := newTestHub(t, mercure.WithStore(st))
	for _, id := range []string{"e1", "e2"} {
		if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	// The cursor is the latest event: the replay yields nothing, yet e1 and
	// e2 are still on their way through the feed.
	s := th.subscribe("match=x", "Last-Event-ID", "e2")
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, ID: "e3"}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the feed catches up: e1 and e2 late, then e3
		st.release <- struct{}{}
	}
	if got := s.next(t).ID; got != "e3" {
		t.Fatalf("got %s, want e3: the client already has e1 and e2", got)
	}
}

// Publishers racing each other: every stream sees the store's order,
// live and on replay, whether it opened before the first update or
// mid-way with a cursor; nothing is lost or repeated at its seam.
func TestStreamsSeeStoreOrderUnderConcurrentPublishers(t *testing.T) {
	t.Parallel()
	const publishers, each = 4, 300
	th := newTestHub(t, withHistory(t, 2*publishers*each), mercure.WithLimits(mercure.Limits{QueueEvents: 4 * publishers * each}))
	match := "match=" + url.QueryEscape(bookTopic)
	// readAll reads s until the "end" update and returns the ids before it.
	readAll := func(s *subscription) ([]string, bool) {
		var ids []string
		for {
			ev, ok := s.tryNext(t)
			if !ok {
				return ids, false
			}
			if ev.Data == "end" {
				return ids, true
			}
			ids = append(ids, ev.ID)
		}
	}
	observer := th.subscribe(match)
	defer observer.close()

	type late struct {
		cursor string
		ids    chan []string
	}
	var (
		lates []late
		mu    sync.Mutex
		wg    sync.WaitGroup
	)
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{bookTopic}, ID: fmt.Sprintf("p%d-%d", p, i)}); err != nil {
					t.Error(err)
					return
				}
				if p != 0 || i%60 != 30 {
					continue
				}
				// Open a stream from the latest recorded update, mid-way.
				l := late{cursor: th.LastEventID(), ids: make(chan []string, 1)}
				s := th.subscribe(match, "Last-Event-ID", l.cursor)
				go func() {
					defer s.close()
					ids, _ := readAll(s)
					l.ids <- ids
				}()
				mu.Lock()
				lates = append(lates, l)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{bookTopic}, ID: "end", Data: "end"}); err != nil {
		t.Fatal(err)
	}
	order, ok := readAll(observer)
	if !ok || len(order) != publishers*each {
		t.Fatalf("the first stream got %d updates (complete: %v), want %d", len(order), ok, publishers*each)
	}
	replay := th.subscribe(match, "Last-Event-ID", store.Earliest)
	defer replay.close()
	if got, _ := readAll(replay); !slices.Equal(got, order) {
		t.Fatalf("a replay from the start differs from what the stream got live:\nlive   %v\nreplay %v", order, got)
	}
	for _, l := range lates {
		i := slices.Index(order, l.cursor)
		if i < 0 {
			t.Fatalf("cursor %q was never delivered", l.cursor)
		}
		if got := <-l.ids; !slices.Equal(got, order[i+1:]) {
			t.Errorf("the stream opened from %q got %d updates, want the %d that follow it in store order", l.cursor, len(got), len(order)-i-1)
		}
	}
	if n := th.Metrics().Overflows; n != 0 {
		t.Errorf("%d streams overflowed", n)
	}
}
