//go:build unix

package mercure_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
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

// Readers that never read cost only themselves: they are ended (by
// their own queue's limit, or as stalled past the queues' budget: no
// progress for a quarter of the write timeout), and
// the readers beside them that keep up get every update and stay
// connected. The publisher goes at the healthy readers' pace (never more
// than a round ahead), as a real one whose readers keep up.
func TestBudgets_StalledReadersPayNotHealthyOnes(t *testing.T) {
	streamModes(t, func(t *testing.T, opts ...mercure.Option) {
		th := newTestHub(t, append(opts, mercure.WithLimits(mercure.Limits{
			MaxBodyBytes: 64 << 10, QueueBytes: 2 << 20, MaxQueuedBytes: 2 << 20, MaxConnections: 1000,
		}), mercure.WithWriteTimeout(8*time.Second))...) // stalled: no progress for 2 s
		stalled := stalledStreams(t, th, "match=x", 200)
		const healthy, rounds, perRound = 10, 20, 20
		var mu sync.Mutex
		cond := sync.NewCond(&mu)
		got := make([]int, healthy)
		ended := 0 // healthy readers whose stream ended
		var wg sync.WaitGroup
		for i := range healthy {
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
		data := strings.Repeat("d", 16<<10)
		for r := 1; r <= rounds; r++ {
			for range perRound {
				if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data}); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			for slices.Min(got) < r*perRound && ended == 0 {
				cond.Wait() // the healthy readers catch up (or one ended: then fail below)
			}
			mu.Unlock()
		}
		wg.Wait()
		for i, n := range got {
			if n != rounds*perRound {
				t.Errorf("healthy reader %d got %d updates of %d", i, n, rounds*perRound)
			}
		}
		m := th.Metrics()
		if m.StreamsClosed[mercure.CloseQueueOverflow] != uint64(len(stalled)) {
			t.Errorf("%d streams closed for overflow, want the %d stalled readers", m.StreamsClosed[mercure.CloseQueueOverflow], len(stalled))
		}
		if open := th.Stats().Streams; open != healthy {
			t.Errorf("%d streams open, want the %d healthy ones", open, healthy)
		}
	})
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
