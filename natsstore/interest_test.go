package natsstore_test

import (
	"context"
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
	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

const interestHubURL = "https://example.com/.well-known/mercure"

// interestHub is a hub on a store of the stream name, served over HTTP.
type interestHub struct {
	*mercure.Hub
	store *natsstore.Store
	srv   *httptest.Server
}

func newInterestHub(t *testing.T, url, name string, opts ...mercure.Option) *interestHub {
	t.Helper()
	s := open(t, url, name)
	h, err := mercure.New(interestHubURL, append([]mercure.Option{mercure.WithStore(s), mercure.WithAnonymousSubscribers(),
		mercure.WithInsecurePublishing(), mercure.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { // before the store closes
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		srv.CloseClientConnections()
		srv.Close()
		s.Close()
	})
	return &interestHub{Hub: h, store: s, srv: srv}
}

func (h *interestHub) subscribe(t *testing.T, matchers ...string) *storetest.Stream {
	t.Helper()
	q := url.Values{"match": matchers}
	return storetest.Subscribe(t, h.srv, "/.well-known/mercure", q.Encode(), "")
}

func (h *interestHub) publish(t testing.TB, topic, id string) {
	t.Helper()
	if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{topic}, ID: id, Data: id}); err != nil {
		t.Fatal(err)
	}
}

// topic is a topic of the test's own.
func topicOf(name string) string { return "https://example.com/" + name }

// A hub whose streams select exact topics reads, of the updates that
// another hub publishes, only those of its streams' topics, and its
// streams get every one of them.
func TestReadsOnlyWhatItServes(t *testing.T) {
	t.Parallel()
	addr, name := server(t).URL, streamName()
	a, b := newInterestHub(t, addr, name), newInterestHub(t, addr, name)
	sa := a.subscribe(t, topicOf("a1"), topicOf("a2"))
	// a1, a2, the hub's own topic, multi-topic updates; B's own and multi-topic.
	storetest.WaitFor(t, "the feeds narrowed", func() bool { return len(a.store.FeedFilter()) == 4 && len(b.store.FeedFilter()) == 2 })
	read, readB := a.store.FeedRead(), b.store.FeedRead()
	for i := range 50 {
		b.publish(t, topicOf("b"), fmt.Sprint("b", i))
	}
	var want []string
	for i := range 10 {
		id := fmt.Sprint("a", i)
		b.publish(t, topicOf(fmt.Sprint("a", 1+i%2)), id)
		want = append(want, id)
	}
	if got := sa.Collect(len(want)); !slices.Equal(got, want) {
		t.Fatalf("A's stream got %v, want %v", got, want)
	}
	if got := a.store.FeedRead() - read; got != uint64(len(want)) {
		t.Fatalf("A's feed read %d messages, want the %d of its topics", got, len(want))
	}
	// B, whose hub has no stream, reads only its own topic and multi-topic
	// updates: the updates it published do not come back.
	if got := b.store.FeedRead() - readB; got != 0 {
		t.Fatalf("B's feed read %d messages, want none", got)
	}
}

// A stream with a URL pattern or * has its hub read everything, at once.
func TestPatternReadsEverything(t *testing.T) {
	t.Parallel()
	addr, name := server(t).URL, streamName()
	a, b := newInterestHub(t, addr, name), newInterestHub(t, addr, name)
	a.subscribe(t, topicOf("a"))
	for i, m := range []string{"match=*", "match_urlpattern=" + url.QueryEscape("https://example.com/:x")} {
		s := storetest.Subscribe(t, a.srv, "/.well-known/mercure", m, "")
		if f := a.store.FeedFilter(); f != nil {
			t.Fatalf("%s: A's feed reads %v, want everything", m, f)
		}
		id := fmt.Sprint("b", i)
		b.publish(t, topicOf("b"), id)
		if got := s.Collect(1); !slices.Equal(got, []string{id}) {
			t.Fatalf("%s: the stream got %v, want %s", m, got, id)
		}
		s.Close()
	}
}

// While updates of a topic flow, streams that open on it, on a hub whose
// feed did not read it, miss none published after they opened, and get
// them without a gap: the store takes the topic before the stream
// registers, and its new consumer reads again after the last event it
// passed on (which updates of a topic the hub reads all along move on).
func TestNewTopicMissesNothing(t *testing.T) {
	t.Parallel()
	addr, name := server(t).URL, streamName()
	a, b := newInterestHub(t, addr, name), newInterestHub(t, addr, name)
	bg := a.subscribe(t, topicOf("bg"))
	const rounds, after = 4, 20
	for r := range rounds {
		x := topicOf(fmt.Sprint("x", r))
		var published atomic.Int64 // updates of x acknowledged
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := b.Publish(context.Background(), mercure.Update{Topics: []string{x}, ID: fmt.Sprintf("x%d-%d", r, i)}); err != nil {
					t.Error(err)
					return
				}
				published.Add(1)
				if i%3 == 0 { // the hub's position moves on meanwhile
					if _, err := b.Publish(context.Background(), mercure.Update{Topics: []string{topicOf("bg")}}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
		// bg, x0 to x(r-1) lingering, the hub's own, multi-topic updates.
		storetest.WaitFor(t, "A's feed narrowed", func() bool { return len(a.store.FeedFilter()) == r+3 })
		storetest.WaitFor(t, "updates flowing", func() bool { return published.Load() > 5 })
		s := a.subscribe(t, x)
		opened := published.Load() // published before the stream answered: it may or may not get them
		storetest.WaitFor(t, "updates after the stream opened", func() bool { return published.Load() > opened+after })
		close(stop)
		wg.Wait()
		last := published.Load() - 1
		lastID := fmt.Sprintf("x%d-%d", r, last)
		var got []string
		for !slices.Contains(got, lastID) {
			select {
			case id := <-s.IDs:
				got = append(got, id)
			case <-time.After(storetest.Deadline):
				t.Fatalf("round %d: the stream got %v, not %s", r, got, lastID)
			}
		}
		var first int64 = -1
		for i, id := range got {
			var k int64
			if _, err := fmt.Sscanf(id, fmt.Sprintf("x%d-%%d", r), &k); err != nil {
				t.Fatalf("round %d: stream got %q", r, id)
			}
			if i == 0 {
				first = k
			}
			if k != first+int64(i) {
				t.Fatalf("round %d: the stream got %v: a hole before %s", r, got, id)
			}
		}
		if first < 0 || first > opened || first+int64(len(got))-1 != last {
			t.Fatalf("round %d: the stream got x%d-%d to x%d-%d, want from x%d-%d at the latest to x%d-%d", r, r, first, r, first+int64(len(got))-1, r, opened, r, last)
		}
		s.Close()
	}
	bg.Read()
}

// EndStreams reaches a hub whose streams select exact topics: its feed
// reads the hub's instructions whatever its streams.
func TestEndStreamsWhileFiltered(t *testing.T) {
	t.Parallel()
	addr, name := server(t).URL, streamName()
	authorize := func(r *http.Request) (*mercure.Access, error) {
		if c, err := r.Cookie("session"); err == nil {
			return &mercure.Access{Subject: c.Value, Session: c.Value, Subscribe: []mercure.Match{{Pattern: "*"}}}, nil
		}
		return nil, nil
	}
	opt := mercure.WithAuthorizer(authorize, time.Hour)
	a, b := newInterestHub(t, addr, name, opt), newInterestHub(t, addr, name, opt)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.srv.URL+"/.well-known/mercure?match="+url.QueryEscape(topicOf("a")), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", "session=alice")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("subscribe: %s", res.Status)
	}
	// a, the hub's own topic and multi-topic updates.
	storetest.WaitFor(t, "A's feed narrowed", func() bool { return len(a.store.FeedFilter()) == 3 })
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var buf [512]byte
		for {
			if _, err := res.Body.Read(buf[:]); err != nil {
				return
			}
		}
	}()
	if err := b.EndStreams(ctx, mercure.StreamFilter{Subject: "alice"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(storetest.Deadline):
		t.Fatal("A's stream did not end")
	}
}

// Retention that drops, before a filtered feed reads them, messages
// that its filter passes, is reported as a gap.
func TestFilteredFeedReportsDrops(t *testing.T) {
	t.Parallel()
	addr, name := server(t).URL, streamName()
	const keep = 5
	s, w := open(t, addr, name, natsstore.WithMaxLen(keep)), open(t, addr, name, natsstore.WithMaxLen(keep))
	t.Cleanup(func() { s.Close(); w.Close() })
	hold := make(chan struct{})
	var held sync.Once
	var gaps, events atomic.Int64
	want, cancel := s.ListenInterest(store.Listener{
		Event: func(*store.Event) {
			held.Do(func() { <-hold }) // the feed stalls on its first event
			events.Add(1)
		},
		Gap: func() { gaps.Add(1) },
	})
	defer cancel()
	want(store.Interest{Add: []string{"t"}})
	storetest.WaitFor(t, "the feed filtered", func() bool { return len(s.FeedFilter()) == 2 })
	// Past what the consumer sends ahead of the stalled feed, so that
	// retention drops messages it has not sent yet.
	for i := range 1200 {
		storetest.MustAppend(t, w, &store.Event{ID: fmt.Sprint("e", i), Topics: []string{"t"}, Data: strings.Repeat("x", 10)})
	}
	close(hold)
	storetest.WaitFor(t, "a gap reported", func() bool { return gaps.Load() > 0 })
	if n := events.Load(); n >= 1200 {
		t.Fatalf("the feed passed on %d events: retention dropped none", n)
	}
}
