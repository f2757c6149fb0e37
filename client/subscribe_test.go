package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
	"github.com/mercurekit/mercure/internal/loopback"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Events arrive in publication order with every field: id, type, data
// (line breaks normalized to LF) and retry.
func TestSubscribe_OrderAndFields(t *testing.T) {
	th := startHub(t, withHistory(t, 1000))
	publish(t, th.Hub, mercure.Update{Topics: []string{"https://example.com/other"}, Data: "not for us"})
	for i := range 50 {
		publish(t, th.Hub, mercure.Update{Topics: []string{"https://example.com/books/1"}, ID: fmt.Sprintf("urn:e:%d", i), Data: strconv.Itoa(i)})
	}
	publish(t, th.Hub, mercure.Update{
		Topics: []string{"https://example.com/books/1"}, ID: "last", Type: "book-updated",
		Data: "a\r\nb\rc\n", Retry: ptr(5 * time.Millisecond),
	})
	c := fastClient()
	got := collect(t, c.Subscribe(testContext(t, testwait.Deadline), th.endpoint(), client.Subscription{
		Matchers:    []client.Matcher{client.Exact("https://example.com/books/1")},
		LastEventID: client.Earliest,
	}), func(evs []client.Event) bool { return len(evs) == 51 })
	for i, ev := range got[:50] {
		if ev.ID != fmt.Sprintf("urn:e:%d", i) || ev.Data != strconv.Itoa(i) || ev.Type != "" || ev.Retry != nil {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	last := got[50]
	if last.ID != "last" || last.Type != "book-updated" || last.Data != "a\nb\nc\n" || last.Retry == nil || *last.Retry != 5*time.Millisecond {
		t.Fatalf("last event = %+v", last)
	}
}

// Exact, URL pattern and * matchers select what the hub routes to them,
// through GET and, for long matcher lists, through QUERY (SUB-2).
func TestSubscribe_Matchers(t *testing.T) {
	th := startHub(t, withHistory(t, 1000))
	publish(t, th.Hub, mercure.Update{Topics: []string{"https://example.com/books/1"}, ID: "b1"})
	publish(t, th.Hub, mercure.Update{Topics: []string{"https://example.com/authors/7"}, ID: "a7"})
	publish(t, th.Hub, mercure.Update{Topics: []string{"urn:x:a&b=c+d;e%f"}, ID: "odd"})
	publish(t, th.Hub, mercure.Update{Topics: []string{"https://example.com/end"}, ID: "end"})

	// Enough exact matchers to overflow a URL: the client switches to QUERY.
	var many []client.Matcher
	for i := range 40 {
		many = append(many, client.Exact(fmt.Sprintf("https://example.com/padding/%d/%s", i, strings.Repeat("x", 250))))
	}
	for _, tc := range []struct {
		name     string
		matchers []client.Matcher
		method   string
		want     string
	}{
		{"exact", []client.Matcher{client.Exact("https://example.com/books/1")}, "", "b1 end"},
		{"exact with reserved form characters", []client.Matcher{client.Exact("urn:x:a&b=c+d;e%f")}, "", "odd end"},
		{"urlpattern", []client.Matcher{client.URLPattern("/authors/:id")}, "", "a7 end"},
		{"wildcard", []client.Matcher{client.Wildcard()}, "", "b1 a7 odd end"},
		{"urlpattern *", []client.Matcher{client.URLPattern("*")}, "", "b1 a7 odd end"},
		{"QUERY forced", []client.Matcher{client.Exact("https://example.com/books/1")}, "QUERY", "b1 end"},
		{"QUERY for a long list", append(many, client.URLPattern("https://example.com/authors/*")), "", "a7 end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := append(tc.matchers, client.Exact("https://example.com/end"))
			got := collect(t, fastClient().Subscribe(testContext(t, testwait.Deadline), th.endpoint(), client.Subscription{
				Matchers: ms, LastEventID: client.Earliest, Method: tc.method,
			}), func(evs []client.Event) bool { return evs[len(evs)-1].ID == "end" })
			var ids []string
			for _, ev := range got {
				ids = append(ids, ev.ID)
			}
			if strings.Join(ids, " ") != tc.want {
				t.Errorf("got %v, want %s", ids, tc.want)
			}
		})
	}
}

// The acceptance test of resumption: a proxy cuts the stream at random
// points, mid-event too, well over 100 times while updates keep coming;
// the client sees every update exactly once, in order (the spec's section
// on reconnection; REC-4).
func TestSubscribe_ResumeThroughCuttingProxy(t *testing.T) {
	th := startHub(t, withHistory(t, 1_000_000))
	proxy := newCuttingProxy(t, th.srv.Listener.Addr().String(), 40, 1500)
	ctx := testContext(t, 60*time.Second)

	const minCuts, minEvents = 120, 3000
	published := make(chan int, 1)
	go func() {
		n := 0
		for ; n < minEvents || proxy.cuts.Load() < minCuts; n++ {
			if ctx.Err() != nil {
				break
			}
			if _, err := th.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/feed"}, ID: "e" + strconv.Itoa(n), Data: strconv.Itoa(n)}); err != nil {
				t.Errorf("Publish: %v", err)
				break
			}
			if n%20 == 0 {
				time.Sleep(time.Millisecond) // continuous, not one burst
			}
		}
		th.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/feed"}, ID: "end"})
		published <- n
	}()

	var reconnects atomic.Int64
	c := fastClient()
	c.OnRetry = func(error, time.Duration) { reconnects.Add(1) }
	next := 0
	for ev, err := range c.Subscribe(ctx, "http://"+proxy.addr()+th.Path(), client.Subscription{
		Matchers: []client.Matcher{client.Exact("https://example.com/feed")}, LastEventID: client.Earliest,
	}) {
		if err != nil {
			t.Fatalf("subscription ended: %v", err)
		}
		if ev.ID == "end" {
			break
		}
		if want := "e" + strconv.Itoa(next); ev.ID != want || ev.Data != strconv.Itoa(next) {
			t.Fatalf("after %d events and %d reconnections: got %q (%q), want %q", next, reconnects.Load(), ev.ID, ev.Data, want)
		}
		next++
	}
	if ctx.Err() != nil {
		t.Fatalf("timed out after %d events, %d cuts", next, proxy.cuts.Load())
	}
	n := <-published
	if next != n {
		t.Fatalf("got %d events, published %d", next, n)
	}
	if cuts := proxy.cuts.Load(); cuts < minCuts || reconnects.Load() < minCuts {
		t.Fatalf("only %d cuts, %d reconnections", cuts, reconnects.Load())
	}
	t.Logf("%d events, %d cuts, %d reconnections: none lost, none repeated", n, proxy.cuts.Load(), reconnects.Load())
}

// restartableHub serves hubs one after the other on one address, all with
// the same store: a hub restart that keeps its history.
type restartableHub struct {
	t     testing.TB
	addr  string
	store store.Store
	hub   *mercure.Hub
	srv   *http.Server
	done  chan struct{}
}

func (r *restartableHub) start() {
	r.t.Helper()
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(), mercure.WithStore(r.store))
	if err != nil {
		r.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	mux := http.NewServeMux()
	h.Mount(mux)
	r.hub, r.srv, r.done = h, &http.Server{Handler: mux}, make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		srv.Serve(ln)
	}(r.srv, r.done)
}

func (r *restartableHub) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := r.hub.Shutdown(ctx); err != nil {
		r.t.Errorf("Shutdown: %v", err)
	}
	r.srv.Close()
	<-r.done
}

// A hub that restarts on the same address, with its history kept, loses
// the client nothing: it reconnects once the new hub listens and resumes
// where it was. The test also reports the reconnection time.
func TestSubscribe_ResumeAcrossHubRestart(t *testing.T) {
	st, err := memstore.New(memstore.WithMaxEvents(10_000))
	if err != nil {
		t.Fatal(err)
	}
	r := &restartableHub{t: t, addr: loopback.Addr(t), store: st} // free again for the restart
	r.start()
	defer func() { r.stop() }()
	ctx := testContext(t, 30*time.Second)

	var connects atomic.Int64
	var lastConnect atomic.Int64
	c := &client.Client{ReconnectDelay: 10 * time.Millisecond, MinReconnectDelay: 10 * time.Millisecond, MaxReconnectDelay: 200 * time.Millisecond}
	c.OnConnect = func(client.Connection) { connects.Add(1); lastConnect.Store(time.Now().UnixNano()) }
	topic := []string{"https://example.com/feed"}
	var restartedAt time.Time
	// The hub restarts once the client has been refused by the stopped
	// one: OnRetry runs in the iteration, on the test's goroutine.
	down := false
	c.OnRetry = func(err error, _ time.Duration) {
		if !down || !errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		down = false
		r.start()
		restartedAt = time.Now()
		for i := 50; i < 100; i++ {
			publish(t, r.hub, mercure.Update{Topics: topic, ID: "e" + strconv.Itoa(i)})
		}
	}
	publish(t, r.hub, mercure.Update{Topics: topic, ID: "e0"})
	next := 0
	for ev, err := range c.Subscribe(ctx, "http://"+r.addr+r.hub.Path(), client.Subscription{
		Matchers: []client.Matcher{client.Exact(topic[0])}, LastEventID: client.Earliest,
	}) {
		if err != nil {
			t.Fatalf("subscription ended: %v", err)
		}
		if want := "e" + strconv.Itoa(next); ev.ID != want {
			t.Fatalf("got %q, want %q", ev.ID, want)
		}
		next++
		switch next {
		case 1:
			for i := 1; i < 50; i++ {
				publish(t, r.hub, mercure.Update{Topics: topic, ID: "e" + strconv.Itoa(i)})
			}
		case 50:
			r.stop()
			down = true
		}
		if next == 100 {
			break
		}
	}
	if next != 100 {
		t.Fatalf("got %d events", next)
	}
	if connects.Load() != 2 {
		t.Errorf("%d connections, want 2", connects.Load())
	}
	t.Logf("reconnected %v after the new hub started listening", time.Unix(0, lastConnect.Load()).Sub(restartedAt))
}
