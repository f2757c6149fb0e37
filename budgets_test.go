//go:build unix

package mercure_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/alone"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Anonymous clients draw on their own share of the pattern budgets: once
// they hold all the distinct URL patterns they may under a prefix (half of
// MaxPatternsPerPrefix), a token holder still subscribes to a new one
// there; an anonymous client does not.
func TestBudgets_AnonymousPatternsLeaveRoom(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithAnonymousSubscribers(),
		mercure.WithLimits(mercure.Limits{MaxPatternsPerPrefix: 16, MaxPatternsPerTopic: 1024}))
	pattern := func(i int) string {
		return "match_urlpattern=" + url.QueryEscape(fmt.Sprintf("https://example.com/books/:id/p%d", i))
	}
	i := 0
	for ; ; i++ {
		if i > 16 {
			t.Fatal("anonymous clients took more than half the patterns of one prefix")
		}
		s, res := th.trySubscribe(http.MethodGet, pattern(i), "")
		if s == nil {
			if res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("anonymous pattern %d: %d, want 429", i, res.StatusCode)
			}
			break
		}
	}
	if i != 8 {
		t.Fatalf("anonymous clients held %d patterns under the prefix, want 8 (half of 16)", i)
	}
	tok := subToken(t, detail("subscribe", exactTopic("*")))
	for j := range 8 {
		if s, res := th.trySubscribe(http.MethodGet, pattern(100+j), "", "Authorization", "Bearer "+tok); s == nil {
			t.Fatalf("a token holder's pattern %d beside the anonymous ones: %d", j, res.StatusCode)
		}
	}
	if s, res := th.trySubscribe(http.MethodGet, pattern(200), "", "Authorization", "Bearer "+tok); s != nil || res.StatusCode != http.StatusTooManyRequests {
		t.Fatal("the prefix's whole budget did not hold")
	}
}

// Anonymous streams are capped by MaxAnonymousConnections; token holders
// still connect beyond.
func TestBudgets_AnonymousConnections(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithAnonymousSubscribers(),
		mercure.WithLimits(mercure.Limits{MaxConnections: 4, MaxAnonymousConnections: 2}))
	for range 2 {
		th.subscribe("match=x")
	}
	s, res := th.trySubscribe(http.MethodGet, "match=x", "")
	if s != nil || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third anonymous stream: want 429")
	}
	tok := subToken(t, detail("subscribe", exactTopic("*")))
	for range 2 {
		th.subscribe("match=x", "Authorization", "Bearer "+tok)
	}
	if s, _ := th.trySubscribe(http.MethodGet, "match=x", "", "Authorization", "Bearer "+tok); s != nil {
		t.Fatal("MaxConnections did not hold")
	}
}

// Where the hub knows its clients apart (WithClientKey), one client's
// anonymous streams are capped at a tenth of the anonymous share by
// default, so that one address cannot take it all; other clients, and
// the same client with a token, still connect. Without WithClientKey
// (behind a proxy every client may have its address) there is no such
// cap unless Limits.MaxAnonymousConnectionsPerClient sets one.
func TestBudgets_AnonymousPerClient(t *testing.T) {
	key := mercure.WithClientKey(func(r *http.Request) string { return r.Header.Get("X-Client") })
	lim := mercure.Limits{MaxConnections: 100, MaxAnonymousConnections: 20} // a tenth: 2 per client
	th := startAuthHub(t, mercure.WithAnonymousSubscribers(), mercure.WithLimits(lim), key)
	for range 2 {
		th.subscribe("match=x", "X-Client", "a")
	}
	s, res := th.trySubscribe(http.MethodGet, "match=x", "", "X-Client", "a")
	if s != nil {
		t.Fatal("a third anonymous stream of client a opened; want 429")
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "from this client") {
		t.Fatalf("a third anonymous stream of client a: %d %q, want 429 naming the client's share", res.StatusCode, body)
	}
	th.subscribe("match=x", "X-Client", "b")
	tok := subToken(t, detail("subscribe", exactTopic("*")))
	th.subscribe("match=x", "X-Client", "a", "Authorization", "Bearer "+tok)

	// No client key: no per-client cap by default...
	open := startAuthHub(t, mercure.WithAnonymousSubscribers(), mercure.WithLimits(lim))
	for range 5 {
		open.subscribe("match=x")
	}
	// ...unless the limit is set.
	lim.MaxAnonymousConnectionsPerClient = 3
	capped := startAuthHub(t, mercure.WithAnonymousSubscribers(), mercure.WithLimits(lim))
	for range 3 {
		capped.subscribe("match=x")
	}
	if s, res := capped.trySubscribe(http.MethodGet, "match=x", ""); s != nil || res.StatusCode != http.StatusTooManyRequests {
		t.Fatal("MaxAnonymousConnectionsPerClient 3 let a fourth anonymous stream open")
	}
}

// Readers that never read cost only themselves: they are ended (by
// their own queue's limit, or as stalled past the queues' budget: no
// progress for a quarter of the write timeout), and
// the readers beside them that keep up get every update and stay
// connected. The publisher goes at the healthy readers' pace (never more
// than a round ahead), as a real one whose readers keep up.
func TestBudgets_StalledReadersPayNotHealthyOnes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits seconds for the stalled readers to be shed")
	}
	// The stall grace is 5 s, and the test runs in a process of its
	// own, as the test of 2 000 stalled readers (see there why), and like
	// that test it starts first.
	if !alone.InProcess(t) {
		return
	}
	const writeTimeout = 20 * time.Second
	streamModesParallel(t, func(t *testing.T, opts ...mercure.Option) {
		th := newTestHub(t, append(opts, mercure.WithLimits(mercure.Limits{
			MaxBodyBytes: 64 << 10, QueueBytes: 2 << 20, MaxQueuedBytes: 2 << 20, MaxConnections: 1000,
		}), mercure.WithLimits(mercure.Limits{WriteTimeout: writeTimeout}))...) // stalled: no progress for 5 s
		stalled := stalledStreams(t, th, "match=x", 200)
		const healthy, rounds, perRound = 10, 20, 20
		got := healthyReaders(t, th, healthy, rounds, perRound, 16<<10)
		for i, n := range got {
			if n != rounds*perRound {
				t.Errorf("healthy reader %d got %d updates of %d", i, n, rounds*perRound)
			}
		}
		// Every stalled reader pays: shed for overflow while the queues
		// are over budget, or, when it stalled late (a busy machine can
		// leave it under budget until the end), ended by the write
		// timeout. No healthy stream ended for either.
		if !testwait.Within(writeTimeout+testwait.Deadline, func() bool { return th.Metrics().Streams == healthy }) {
			t.Fatalf("%d streams open, want the %d healthy ones: the stalled ones were neither shed nor timed out", th.Metrics().Streams, healthy)
		}
		m := th.Metrics()
		paid := m.StreamsClosed[mercure.CloseQueueOverflow] + m.StreamsClosed[mercure.CloseWriteError]
		if paid != uint64(len(stalled)) || m.StreamsClosed[mercure.CloseQueueOverflow] == 0 {
			t.Errorf("%d streams closed for overflow and %d for a write error, want the %d stalled readers, most for overflow",
				m.StreamsClosed[mercure.CloseQueueOverflow], m.StreamsClosed[mercure.CloseWriteError], len(stalled))
		}
	})
}

// healthyReaders opens n streams of "match=x" on th that read all they
// get, publishes rounds of perRound updates of size bytes to x, never
// more than a round ahead of the slowest reader (a publisher whose
// readers keep up), and returns how many updates each reader got: all
// of them, unless its stream ended.
func healthyReaders(t *testing.T, th *testHub, n, rounds, perRound, size int) []int {
	t.Helper()
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	got := make([]int, n)
	ended := 0 // readers whose stream ended
	var wg sync.WaitGroup
	for i := range n {
		res := openUntilCleanup(t, th, "match=x")
		wg.Go(func() {
			defer func() {
				mu.Lock()
				ended++
				mu.Unlock()
				cond.Broadcast()
			}()
			br := bufio.NewReader(res.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if strings.HasPrefix(line, "data: ") {
					mu.Lock()
					got[i]++
					done := got[i] == rounds*perRound
					mu.Unlock()
					cond.Broadcast()
					if done {
						return
					}
				}
			}
		})
	}
	data := strings.Repeat("d", size)
	for r := 1; r <= rounds; r++ {
		for range perRound {
			if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		for slices.Min(got) < r*perRound && ended == 0 {
			cond.Wait() // the readers catch up (or one ended: the caller fails)
		}
		mu.Unlock()
	}
	wg.Wait()
	return got
}

// openUntilCleanup opens a GET stream of q, read by the caller, which
// ends when the test does, however long it takes.
func openUntilCleanup(t *testing.T, th *testHub, q string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, th.endpoint()+"?"+q, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		res.Body.Close()
	})
	return res
}
