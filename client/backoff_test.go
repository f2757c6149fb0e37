package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure/client"
)

// The tests of this file run in testing/synctest bubbles over in-memory
// connections: the clock is fake, so minutes of delays pass at once and
// the delays the client waited are measured exactly.

// attempts records the requests a server got, at the bubble's time.
type attempts struct {
	mu          sync.Mutex
	at          []time.Time
	lastEventID []string
}

// add records r and returns its number, from 0.
func (a *attempts) add(r *http.Request) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = append(a.at, time.Now())
	a.lastEventID = append(a.lastEventID, r.Header.Get("Last-Event-ID"))
	return len(a.at) - 1
}

// gaps returns the time between each request and the next.
func (a *attempts) gaps() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(a.at); i++ {
		out = append(out, a.at[i].Sub(a.at[i-1]))
	}
	return out
}

// openStream answers 200 with an event stream and sends the headers.
func openStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// memHubURL is the URL of the in-memory servers (any host leads there).
const memHubURL = "http://hub.test/.well-known/mercure"

var everything = client.Subscription{Matchers: []client.Matcher{client.Wildcard()}}

// A hub cannot make a client with default settings hammer it: whatever
// its retry field says (0 here), connections are at least
// DefaultMinReconnectDelay apart, and the delay doubles after each one
// that delivered nothing, up to DefaultMaxReconnectDelay. Each wait is
// checked against its nominal value d: it lies in [d, 1.5d] (jitter).
// Before this bound, a server sending retry: 0 saw 449 connections a
// second.
func TestSubscribe_HubCannotMakeTheClientHammerIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		answer   func(w http.ResponseWriter, n int)
		base     time.Duration // the first nominal delay
		progress bool          // each stream delivers a new event: no doubling
	}{
		{"retry 0, then the stream ends", func(w http.ResponseWriter, _ int) {
			openStream(w)
			io.WriteString(w, "retry: 0\n\n")
		}, client.DefaultMinReconnectDelay, false},
		{"retry 0 and a new event, then the stream ends", func(w http.ResponseWriter, n int) {
			openStream(w)
			fmt.Fprintf(w, "retry: 0\nid: %d\ndata: x\n\n", n)
		}, client.DefaultMinReconnectDelay, true},
		{"the connection closes before any answer", func(http.ResponseWriter, int) {
			panic(http.ErrAbortHandler)
		}, client.DefaultReconnectDelay, false},
		{"503 with Retry-After: 0", func(w http.ResponseWriter, _ int) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, client.DefaultReconnectDelay, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var seen attempts
				s := startMemServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					tc.answer(w, seen.add(r))
				}))
				const window = 2 * time.Minute
				ctx, cancel := context.WithTimeout(t.Context(), window)
				defer cancel()
				c := &client.Client{HTTPClient: s.Client}
				for _, err := range c.Subscribe(ctx, memHubURL, everything) {
					if err != nil {
						t.Fatal(err)
					}
				}
				gaps := seen.gaps()
				d := tc.base
				for i, gap := range gaps {
					if gap < d || gap > d+d/2 {
						t.Fatalf("wait %d: %v, want within [%v, %v]; the first: %v", i, gap, d, d+d/2, gaps[:min(len(gaps), 10)])
					}
					if !tc.progress {
						d = min(2*d, client.DefaultMaxReconnectDelay)
					}
				}
				if tc.progress {
					for i, id := range seen.lastEventID[1:] {
						if id != fmt.Sprint(i) {
							t.Fatalf("connection %d resumed after %q, want %d", i+1, id, i)
						}
					}
				}
				if len(gaps) < 3 {
					t.Fatalf("only %d reconnections in %v", len(gaps), window)
				}
				t.Logf("%d connections in %v", len(gaps)+1, window)
			})
		})
	}
}

// A hub cannot park a subscriber either: Retry-After and the retry field
// are honoured up to DefaultMaxHubDelay, whatever their size, jitter
// included, and a
// Retry-After too large for a time.Duration saturates instead of wrapping
// around to a negative or tiny delay. A malformed Retry-After is ignored.
func TestSubscribe_HubDelaysAreCapped(t *testing.T) {
	t.Parallel()
	retryAfter := func(v func() string) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", v())
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	is := func(s string) func() string { return func() string { return s } }
	in := func(d time.Duration) func() string {
		return func() string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	}
	const forever = time.Duration(math.MaxInt64)
	hubMax := client.DefaultMaxHubDelay
	for _, tc := range []struct {
		name       string
		answer     func(http.ResponseWriter) // the first answer; then a stream
		retryAfter time.Duration             // StatusError.RetryAfter; -1: not a StatusError
		wait       time.Duration             // the nominal delay
	}{
		{"Retry-After: 120", retryAfter(is("120")), 2 * time.Minute, 2 * time.Minute},
		{"Retry-After: 999999 (11 days)", retryAfter(is("999999")), 999999 * time.Second, hubMax},
		{"Retry-After past the longest Duration", retryAfter(is("9223372037")), forever, hubMax},
		{"Retry-After past the largest uint64", retryAfter(is("99999999999999999999999")), forever, hubMax},
		{"Retry-After: an HTTP-date 2 minutes ahead", retryAfter(in(2 * time.Minute)), 2 * time.Minute, 2 * time.Minute},
		{"Retry-After: an HTTP-date 10 minutes ahead", retryAfter(in(10 * time.Minute)), 10 * time.Minute, hubMax},
		{"Retry-After: an HTTP-date in year 9999", retryAfter(is("Fri, 31 Dec 9999 23:59:59 GMT")), forever, hubMax},
		{"Retry-After: an HTTP-date past", retryAfter(is("Sat, 01 Jan 1994 00:00:00 GMT")), 0, client.DefaultReconnectDelay},
		{"Retry-After: -5", retryAfter(is("-5")), 0, client.DefaultReconnectDelay},
		{"Retry-After: 1e3", retryAfter(is("1e3")), 0, client.DefaultReconnectDelay},
		{"retry: 999999999 (11 days)", func(w http.ResponseWriter) {
			openStream(w)
			io.WriteString(w, "retry: 999999999\n\n")
		}, -1, hubMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var seen attempts
				s := startMemServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if seen.add(r) == 0 {
						tc.answer(w)
						return
					}
					openStream(w)
					io.WriteString(w, "id: 1\ndata: back\n\n")
				}))
				var reason error
				c := &client.Client{HTTPClient: s.Client, OnRetry: func(err error, _ time.Duration) { reason = err }}
				for ev, err := range c.Subscribe(t.Context(), memHubURL, everything) {
					if err != nil || ev.Data != "back" {
						t.Fatalf("got %+v, %v", ev, err)
					}
					break
				}
				var se *client.StatusError
				switch {
				case tc.retryAfter < 0 && errors.As(reason, &se):
					t.Fatalf("retried after %v", reason)
				case tc.retryAfter >= 0 && (!errors.As(reason, &se) || se.RetryAfter != tc.retryAfter):
					t.Fatalf("retried after %#v, want a StatusError with RetryAfter %v", reason, tc.retryAfter)
				}
				// Jitter spreads the clients: above the delay asked, or
				// below the cap when the hub asked for it or more, which
				// holds whatever the jitter.
				lo, hi := tc.wait, tc.wait+tc.wait/2
				if tc.wait == hubMax {
					lo, hi = hubMax-hubMax/4, hubMax
				}
				if gap := seen.gaps()[0]; gap < lo || gap > hi {
					t.Fatalf("waited %v, want within [%v, %v]", gap, lo, hi)
				}
			})
		})
	}
}

// The bounds are the client's to set: MinReconnectDelay and MaxHubDelay
// replace the defaults.
func TestSubscribe_DelayBoundsAreConfigurable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var seen attempts
		s := startMemServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch seen.add(r) {
			case 0: // the floor: 2 s, not 0
				openStream(w)
				io.WriteString(w, "retry: 0\nid: 1\ndata: x\n\n")
			case 1: // the cap: 1 minute, not 11 days
				w.Header().Set("Retry-After", "999999")
				w.WriteHeader(http.StatusServiceUnavailable)
			default:
				openStream(w)
				io.WriteString(w, "id: 2\ndata: back\n\n")
			}
		}))
		c := &client.Client{HTTPClient: s.Client, MinReconnectDelay: 2 * time.Second, MaxHubDelay: time.Minute}
		for ev, err := range c.Subscribe(t.Context(), memHubURL, everything) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.ID == "2" {
				break
			}
		}
		gaps := seen.gaps()
		if len(gaps) != 2 || gaps[0] < 2*time.Second || gaps[0] > 3*time.Second || gaps[1] < 45*time.Second || gaps[1] > time.Minute {
			t.Fatalf("waits %v, want 2 s to 3 s, then 45 s to 1 min (the cap, jitter below it)", gaps)
		}
	})
}
