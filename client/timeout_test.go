package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure/client"
)

// A server that accepts and never answers is left after HeaderTimeout,
// and the subscription tries again; with HeaderTimeout negative, the
// client waits as long as the context lets it.
func TestSubscribe_HeaderTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    int // requests within an hour
	}{
		{"default", 0, 2},
		{"none", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var seen attempts
				s := startMemServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if seen.add(r) == 0 {
						<-r.Context().Done() // no answer at all
						return
					}
					openStream(w)
					io.WriteString(w, "id: 1\ndata: answered\n\n")
				}))
				var reason error
				c := &client.Client{HTTPClient: s.Client, HeaderTimeout: tc.timeout, OnRetry: func(err error, _ time.Duration) { reason = err }}
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
				defer cancel()
				for ev, err := range c.Subscribe(ctx, memHubURL, everything) {
					if err != nil || ev.Data != "answered" {
						t.Fatalf("got %+v, %v", ev, err)
					}
					break
				}
				if got := len(seen.gaps()) + 1; got != tc.want {
					t.Fatalf("%d requests in an hour, want %d", got, tc.want)
				}
				if tc.want == 1 {
					return
				}
				if !errors.Is(reason, client.ErrTimeout) {
					t.Fatalf("retried after %v, want ErrTimeout", reason)
				}
				// The timeout, then the first reconnection delay.
				lo := client.DefaultHeaderTimeout + client.DefaultReconnectDelay
				if gap := seen.gaps()[0]; gap < lo || gap > lo+client.DefaultReconnectDelay/2 {
					t.Fatalf("reconnected after %v, want %v plus jitter", gap, lo)
				}
			})
		})
	}
}

// Publish gives up on a hub that never answers after HeaderTimeout, with
// ErrTimeout, rather than hanging as long as its context lets it.
func TestPublish_HeaderTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := startMemServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // then the server notices the client leaving
			<-r.Context().Done()
		}))
		c := &client.Client{HTTPClient: s.Client, HeaderTimeout: 5 * time.Second}
		start := time.Now()
		_, err := c.Publish(t.Context(), memHubURL, client.Update{Topics: []string{"t"}})
		if !errors.Is(err, client.ErrTimeout) || time.Since(start) != 5*time.Second {
			t.Fatalf("after %v: %v, want ErrTimeout after 5s", time.Since(start), err)
		}
	})
}

// Keep-alive comments keep a stream alive however long no event comes; a
// stream silent past IdleTimeout is dropped and resumed after its last
// event, so that nothing is missed. With IdleTimeout negative, a silent
// stream is kept.
func TestSubscribe_SilentStreamIsResumed(t *testing.T) {
	t.Parallel()
	const keepAlive, keepAlives = 15 * time.Second, 20 // 5 minutes, longer than the idle timeout
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    int // connections within an hour
	}{
		{"default", 0, 2},
		{"none", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var seen attempts
				s := startMemServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := seen.add(r)
					openStream(w)
					if n > 0 {
						io.WriteString(w, "id: 2\ndata: after the silence\n\n")
						w.(http.Flusher).Flush()
						<-r.Context().Done()
						return
					}
					io.WriteString(w, "id: 1\ndata: before\n\n")
					w.(http.Flusher).Flush()
					for range keepAlives {
						time.Sleep(keepAlive)
						io.WriteString(w, ":\n")
						w.(http.Flusher).Flush()
					}
					<-r.Context().Done() // silence: a path that lost the peer
				}))
				var reason error
				c := &client.Client{HTTPClient: s.Client, IdleTimeout: tc.timeout, OnRetry: func(err error, _ time.Duration) { reason = err }}
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
				defer cancel()
				var got []string
				for ev, err := range c.Subscribe(ctx, memHubURL, everything) {
					if err != nil {
						t.Fatal(err)
					}
					if got = append(got, ev.ID); ev.ID == "2" {
						break
					}
				}
				if n := len(seen.gaps()) + 1; n != tc.want {
					t.Fatalf("%d connections in an hour, want %d; gaps %v, ids %q, reason %v", n, tc.want, seen.gaps(), seen.lastEventID, reason)
				}
				if tc.want == 1 {
					return
				}
				if len(got) != 2 || got[0] != "1" || seen.lastEventID[1] != "1" {
					t.Fatalf("events %q; the second connection resumed after %q", got, seen.lastEventID[1])
				}
				if !errors.Is(reason, client.ErrTimeout) {
					t.Fatalf("retried after %v, want ErrTimeout", reason)
				}
				// The keep-alives, the silence, then the first reconnection delay.
				lo := keepAlives*keepAlive + client.DefaultIdleTimeout + client.DefaultReconnectDelay
				if gap := seen.gaps()[0]; gap < lo || gap > lo+client.DefaultReconnectDelay/2 {
					t.Fatalf("reconnected after %v, want %v plus jitter", gap, lo)
				}
			})
		})
	}
}
