package mercure_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure"
)

// streamRecorder is a ResponseWriter that records when each private
// update reached it: the stream of a browser, without a socket, so that
// the test runs in a synctest bubble.
type streamRecorder struct {
	mu      sync.Mutex
	hdr     http.Header
	updates []time.Time // when each "data: news" was written
}

func (w *streamRecorder) Header() http.Header { return w.hdr }
func (w *streamRecorder) WriteHeader(int)     {}
func (w *streamRecorder) Flush()              {}
func (w *streamRecorder) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for range strings.Count(string(b), "data: news") {
		w.updates = append(w.updates, time.Now())
	}
	return len(b), nil
}

func (w *streamRecorder) after(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.updates {
		if at.After(t) {
			n++
		}
	}
	return n
}

// recheckRun is what happened to the streams of a recheck scenario.
type recheckRun struct {
	calls       int64         // Authorizer calls over four intervals, all sessions valid
	maxEnd      time.Duration // from the revocation to the last stream's end
	afterRevoke int           // private updates written after the revocation
	afterBound  int           // of which after the documented bound
}

// runRechecks opens streams streams for users users (streams/users each,
// sharing their session cookie) on a hub whose Authorizer answers in
// latency and re-checks every interval; after a while, it revokes every
// session at once, publishing a private update every 50 ms that every
// stream may read while its session lasts.
//
// With endStreams, the application also calls Hub.EndStreams for each
// user as it revokes the sessions, as at a logout.
func runRechecks(t *testing.T, streams, users int, latency, interval time.Duration, endStreams bool) recheckRun {
	var run recheckRun
	synctest.Test(t, func(t *testing.T) {
		var (
			mu       sync.Mutex
			valid    = make(map[string]bool)
			calls    atomic.Int64
			news     = []mercure.Match{{Pattern: "https://example.com/news"}}
			authoriz = func(r *http.Request) (*mercure.Access, error) {
				calls.Add(1)
				time.Sleep(latency)
				c, err := r.Cookie("session")
				mu.Lock()
				defer mu.Unlock()
				if err != nil || !valid[c.Value] {
					return nil, nil
				}
				return &mercure.Access{Subject: c.Value, Subscribe: news}, nil
			}
		)
		for u := range users {
			valid[fmt.Sprint("user", u)] = true
		}
		h, err := mercure.New(testHubURL, mercure.WithAuthorizer(authoriz, interval), mercure.WithLogger(nil),
			mercure.WithLimits(mercure.Limits{MaxConnections: streams + 1}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		recs := make([]*streamRecorder, streams)
		ended := make([]time.Time, streams)
		var wg sync.WaitGroup
		for i := range streams {
			recs[i] = &streamRecorder{hdr: make(http.Header)}
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/.well-known/mercure?match="+url.QueryEscape("https://example.com/news"), nil)
			req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:4000", i>>16, i>>8&255, i&255)
			req.Header.Set("Cookie", fmt.Sprint("session=user", i%users))
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			wg.Go(func() {
				h.ServeHTTP(recs[i], req)
				ended[i] = time.Now()
			})
		}
		time.Sleep(latency + time.Millisecond) // every stream authorized
		synctest.Wait()

		// Sessions valid: the Authorizer is asked once per session and
		// interval, however many streams share a session.
		time.Sleep(interval)
		before := calls.Load()
		time.Sleep(4 * interval)
		run.calls = calls.Load() - before
		for i, at := range ended {
			if !at.IsZero() {
				t.Fatalf("stream %d ended with its session valid", i)
			}
		}

		mu.Lock()
		clear(valid)
		mu.Unlock()
		revoked := time.Now()
		if endStreams {
			for u := range users {
				if err := h.EndStreams(context.Background(), mercure.StreamFilter{Subject: fmt.Sprint("user", u)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for range int(2 * interval / (50 * time.Millisecond)) {
			if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/news"}, Data: "news", Private: true}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(interval)
		synctest.Wait()
		bound := revoked.Add(interval + latency)
		for i, at := range ended {
			if at.IsZero() {
				t.Fatalf("stream %d still open %v after its session was revoked", i, time.Since(revoked))
			}
			run.maxEnd = max(run.maxEnd, at.Sub(revoked))
			run.afterRevoke += recs[i].after(revoked)
			run.afterBound += recs[i].after(bound)
		}
		cancel()
		wg.Wait()
		h.Shutdown(context.Background())
	})
	return run
}

// A revoked session's streams end within the re-check interval plus one
// Authorizer call, at any number of streams, and receive no private
// update past that; the Authorizer is called once per session and
// interval, not once per stream (issue 24: with 3 000 streams and a
// 200 ms Authorizer, streams ended up to 10 s after a logout).
func TestAuthorizer_RecheckBound(t *testing.T) {
	t.Parallel()
	const latency, interval = 200 * time.Millisecond, 2 * time.Second
	cases := []struct {
		streams, users int
		endStreams     bool
	}{
		{1000, 1000, false}, // one stream per user
		{1000, 100, false},  // ten per user
		{3000, 3000, false},
		{3000, 300, false},
		{1000, 100, true}, // and the application ends the streams at once
		{3000, 3000, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d-streams-%d-users-EndStreams-%v", c.streams, c.users, c.endStreams), func(t *testing.T) {
			if c.streams > 1000 && testing.Short() {
				t.Skip("-short")
			}
			run := runRechecks(t, c.streams, c.users, latency, interval, c.endStreams)
			t.Logf("%d streams, %d users, EndStreams %v: %d Authorizer calls in 4 intervals; streams ended at most %v after the revocation; %d private updates after it, %d after the bound",
				c.streams, c.users, c.endStreams, run.calls, run.maxEnd, run.afterRevoke, run.afterBound)
			if c.endStreams && (run.maxEnd != 0 || run.afterRevoke != 0) {
				t.Errorf("with EndStreams: streams ended %v after the revocation, %d updates after it; want at once, none", run.maxEnd, run.afterRevoke)
			}
			if run.maxEnd > interval+latency {
				t.Errorf("a stream ended %v after its session was revoked, past the bound %v", run.maxEnd, interval+latency)
			}
			if run.afterBound != 0 {
				t.Errorf("%d private updates written past the bound", run.afterBound)
			}
			if maxCalls := int64(5 * c.users); run.calls > maxCalls || run.calls < int64(3*c.users) {
				t.Errorf("%d Authorizer calls in four intervals, want one per session and interval (%d sessions)", run.calls, c.users)
			}
		})
	}
}
