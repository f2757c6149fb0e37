package mercure_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure"
)

// wantDrainRetry fails unless ev is the retry a drained stream gets: a
// second, with jitter.
func wantDrainRetry(t *testing.T, ev sseEvent) {
	t.Helper()
	ms, err := strconv.Atoi(ev.Retry)
	if err != nil || ms < 500 || ms >= 1500 || ev.HasData || ev.ID != "" {
		t.Fatalf("farewell event %q, want only a retry of 500 to 1499 ms", ev.Lines)
	}
}

// With Limits.Drain, Shutdown ends streams one by one over the window, each
// told a retry first and ended cleanly; until its turn a stream gets
// updates; meanwhile the hub is not ready, publishing works, and a new
// subscriber gets 200 with a retry and an immediate end, which an
// EventSource follows by reconnecting rather than giving up. The test
// runs in a synctest bubble: the drain's window passes on the bubble's
// clock, and nothing happens between two of the test's steps unless the
// test lets time pass.
func TestDrain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		th := startBubbleHub(t, nil, mercure.WithInsecurePublishing(), mercure.WithLimits(mercure.Limits{Drain: 3 * time.Second}))
		const n = 12
		subs := make([]*subscription, n)
		for i := range subs {
			subs[i] = th.subscribe("match=urn%3Aa")
		}
		shutdown := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			shutdown <- th.Shutdown(ctx)
		}()
		synctest.Wait()
		if !errors.Is(th.Live(), mercure.ErrHubClosed) || !errors.Is(th.Ready(), mercure.ErrHubClosed) {
			t.Fatalf("during the drain: Live %v, Ready %v", th.Live(), th.Ready())
		}

		// A new subscriber: 200, a retry, the end.
		req := th.newRequest(context.Background(), http.MethodGet, "match=urn%3Aa", "")
		res, err := th.httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" ||
			!strings.HasPrefix(string(body), "retry: ") || strings.Count(string(body), "\n") != 1 || !strings.HasSuffix(string(body), "\n") {
			t.Fatalf("subscribe during the drain: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), body)
		}

		// Some stream ends first; the others wait for their turn.
		ended := func() int {
			k := 0
			for _, s := range subs {
				select {
				case <-s.done:
					k++
				default:
				}
			}
			return k
		}
		for ended() == 0 {
			time.Sleep(time.Millisecond)
			synctest.Wait()
		}
		if k := ended(); k == n {
			t.Fatal("every stream ended at once")
		}
		// The streams still open get what is published meanwhile.
		if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"urn:a"}, Data: "during"}); err != nil {
			t.Fatalf("Publish during the drain: %v", err)
		}
		gotUpdate := 0
		for _, s := range subs {
			ev := s.next(t)
			if ev.Data == "during" {
				gotUpdate++
				ev = s.next(t)
			}
			wantDrainRetry(t, ev)
			<-s.done
			if s.err != nil {
				t.Fatalf("a drained stream ended with %v, want a clean end", s.err)
			}
		}
		if gotUpdate == 0 {
			t.Fatal("no stream got the update published during the drain: they all ended at once")
		}
		if err := <-shutdown; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if got := th.Metrics().StreamsClosed[mercure.CloseShutdown]; got != n {
			t.Fatalf("streams closed for shutdown: %d, want %d", got, n)
		}
	})
}

// A drain never outlasts Shutdown's context: it is compressed to fit,
// every stream told to retry and ended cleanly before the deadline. With
// several streams, a drain of an hour left as it is would end the second
// half an hour in. On the bubble's clock.
func TestDrain_FitsTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		th := startBubbleHub(t, nil, mercure.WithLimits(mercure.Limits{Drain: time.Hour}))
		subs := make([]*subscription, 3)
		for i := range subs {
			subs[i] = th.subscribe("match=urn%3Aa")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		if err := th.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown with a drain of an hour and 4 s to go: %v", err)
		}
		for _, s := range subs {
			wantDrainRetry(t, s.next(t))
			<-s.done
			if s.err != nil {
				t.Fatalf("a drained stream ended with %v, want a clean end", s.err)
			}
		}
	})
}

// Shutdown returns as soon as nothing is left to drain, from every caller:
// when a second Shutdown skips the drain (the SIGTERM path's Shutdown
// must not go on pacing streams that are gone), and when the streams'
// clients leave before their turn. The window is an hour on the bubble's
// clock; each Shutdown must return within a few seconds of it.
func TestDrain_EndsWhenNothingIsLeft(t *testing.T) {
	t.Parallel()
	const window = time.Hour
	for _, c := range []struct {
		name  string
		empty func(th *testHub, subs []*subscription)
	}{
		{"a second Shutdown", func(th *testHub, subs []*subscription) {
			if err := th.Shutdown(context.Background()); err != nil {
				t.Errorf("second Shutdown: %v", err)
			}
		}},
		{"the clients leave", func(th *testHub, subs []*subscription) {
			for _, s := range subs {
				s.close()
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				th := startBubbleHub(t, nil, mercure.WithLimits(mercure.Limits{Drain: window}))
				subs := make([]*subscription, 20)
				for i := range subs {
					subs[i] = th.subscribe("match=urn%3Aa")
				}
				start := time.Now()
				first := make(chan error, 1)
				go func() { first <- th.Shutdown(context.Background()) }()
				time.Sleep(time.Minute) // a few streams drained, most waiting their turn
				synctest.Wait()
				c.empty(th, subs)
				if err := <-first; err != nil {
					t.Fatalf("the first Shutdown: %v", err)
				}
				if took := time.Since(start); took > time.Minute+10*time.Second {
					t.Fatalf("the first Shutdown returned %v after it began, %v after nothing was left to drain", took, took-time.Minute)
				}
			})
		})
	}
}

func TestDrain_RejectsNegative(t *testing.T) {
	t.Parallel()
	if _, err := mercure.New(testHubURL, mercure.WithLimits(mercure.Limits{Drain: -time.Second})); !errors.Is(err, mercure.ErrInvalidOption) {
		t.Fatalf("New: %v, want ErrInvalidOption", err)
	}
}

// The README's recipe: Hub.Shutdown registered with RegisterOnShutdown
// drains the streams when http.Server.Shutdown begins, so that Shutdown
// returns once they ended rather than wait its whole deadline, and no
// stream is cut.
func TestDrain_RegisterOnShutdownRecipe(t *testing.T) {
	t.Parallel()
	hub, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(), mercure.WithLimits(mercure.Limits{Drain: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	hub.Mount(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	hubDone := make(chan struct{})
	srv.RegisterOnShutdown(func() {
		defer close(hubDone)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := hub.Shutdown(ctx); err != nil {
			t.Errorf("hub.Shutdown: %v", err)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	th := &testHub{Hub: hub, srv: &httptest.Server{URL: "http://" + ln.Addr().String()}, t: t}
	subs := []*subscription{th.subscribe("match=urn%3Aa"), th.subscribe("match=urn%3Ab")}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("srv.Shutdown: %v (it waited for the streams)", err)
	}
	<-hubDone
	for _, s := range subs {
		wantDrainRetry(t, s.next(t))
		<-s.done
		if s.err != nil {
			t.Fatalf("stream cut: %v", s.err)
		}
	}
}
