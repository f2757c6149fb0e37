package mercure_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"go.uber.org/goleak"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

func TestNew_RejectsBadOptions(t *testing.T) {
	t.Parallel()
	type options struct {
		url  string
		opts []mercure.Option
	}
	cases := map[string]options{
		"nil store":              {testHubURL, []mercure.Option{mercure.WithStore(nil)}},
		"negative limit":         {testHubURL, []mercure.Option{mercure.WithLimits(mercure.Limits{MaxTopics: -1})}},
		"negative body timeout":  {testHubURL, []mercure.Option{mercure.WithLimits(mercure.Limits{BodyTimeout: -time.Second})}},
		"negative keep-alive":    {testHubURL, []mercure.Option{mercure.WithLimits(mercure.Limits{KeepAlive: -time.Second})}},
		"negative drain":         {testHubURL, []mercure.Option{mercure.WithLimits(mercure.Limits{Drain: -time.Second})}},
		"negative write timeout": {testHubURL, []mercure.Option{mercure.WithLimits(mercure.Limits{WriteTimeout: -time.Second})}},
		"negative write delay":   {testHubURL, []mercure.Option{mercure.WithLimits(mercure.Limits{WriteDelay: -time.Millisecond})}},
		"write delay over 1s":    {testHubURL, []mercure.Option{mercure.WithLimits(mercure.Limits{WriteDelay: 2 * time.Second})}},
		"nil client key":         {testHubURL, []mercure.Option{mercure.WithClientKey(nil)}},
		"nil option":             {testHubURL, []mercure.Option{nil}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := mercure.New(c.url, c.opts...)
			if !errors.Is(err, mercure.ErrInvalidOption) {
				t.Fatalf("New: hub %v, err %v; want ErrInvalidOption", h, err)
			}
		})
	}
}

// New takes an absolute http(s) URL, without query, fragment, user info
// or trailing slash; no path and the path "/" alike get the default one.
func TestNew_HubURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		hubURL string
		want   string // the hub's URL; "" if refused
		why    string // in the error of a refused URL
	}{
		{"https://example.com", "https://example.com/.well-known/mercure", ""},
		{"https://example.com/", "https://example.com/.well-known/mercure", ""},
		{"http://localhost:3000", "http://localhost:3000/.well-known/mercure", ""},
		{"http://localhost:3000/", "http://localhost:3000/.well-known/mercure", ""},
		{"https://example.com/.well-known/mercure", "https://example.com/.well-known/mercure", ""},
		{"https://example.com/app/hub", "https://example.com/app/hub", ""},
		{"HTTPS://example.com/hub", "https://example.com/hub", ""},
		{"https://example.com/hub/", "", "ends with a slash"},
		{"https://example.com//", "", "ends with a slash"},
		{"https://example.com/hub?x=1", "", "has a query"},
		{"https://example.com?", "", "has a query"},
		{"https://example.com/hub#x", "", "fragment"},
		{"https://user@example.com/hub", "", "user info"},
		{"", "", "not an absolute http(s) URL"},
		{"/.well-known/mercure", "", "not an absolute http(s) URL"},
		{"https:///hub", "", "not an absolute http(s) URL"},
		{"ftp://example.com/hub", "", "not an absolute http(s) URL"},
		{"https://exa mple.com/%zz", "", "invalid"},
	} {
		h, err := mercure.New(c.hubURL)
		if err == nil {
			t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
		}
		switch {
		case c.want == "" && (!errors.Is(err, mercure.ErrInvalidOption) || !strings.Contains(err.Error(), c.why)):
			t.Errorf("New(%q): %v, want ErrInvalidOption saying %q", c.hubURL, err, c.why)
		case c.want != "" && err != nil:
			t.Errorf("New(%q): %v", c.hubURL, err)
		case c.want != "" && h.URL() != c.want:
			t.Errorf("New(%q): URL %q, want %q", c.hubURL, h.URL(), c.want)
		}
	}
}

// The hub is mounted at the path of its URL, under any prefix, next to the
// application's own routes; the URL, not the mount point, decides the
// reserved namespace (DIS-1, PUB-6).
func TestHub_MountedUnderPrefix(t *testing.T) {
	t.Parallel()
	h, err := mercure.New("https://example.com/app/hub", mercure.WithInsecurePublishing())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/app/hub", h)
	mux.HandleFunc("/app/books", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "books") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer h.Shutdown(context.Background())

	th := &testHub{Hub: h, srv: srv, t: t}
	s := th.subscribe("match=" + url.QueryEscape("/.well-known/mercure/x"))
	if status, body, _ := th.post("topic=/app/hub/x"); status != http.StatusBadRequest {
		t.Fatalf("reserved topic under the prefix: %d %s", status, body)
	}
	id := th.mustPost("topic=" + url.QueryEscape("/.well-known/mercure/x"))
	if ev := s.next(t); ev.ID != id {
		t.Fatalf("got %+v", ev)
	}
	if status, body, _ := do(t, mustRequest(t, http.MethodGet, srv.URL+"/app/books", "")); status != 200 || body != "books" {
		t.Fatalf("app route: %d %q", status, body)
	}
}

func TestHub_StrippedPrefix(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(h.Path(), http.StripPrefix(h.Path(), h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer h.Shutdown(context.Background())
	th := &testHub{Hub: h, srv: srv, t: t}
	th.mustPost("topic=x")
}

func TestHub_Methods(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	status, _, hdr := do(t, mustRequest(t, http.MethodOptions, th.endpoint(), ""))
	if status != http.StatusNoContent || !strings.Contains(hdr.Get("Allow"), "QUERY") {
		t.Fatalf("OPTIONS: %d Allow %q", status, hdr.Get("Allow"))
	}
	status, _, hdr = do(t, mustRequest(t, http.MethodDelete, th.endpoint(), ""))
	if status != http.StatusMethodNotAllowed || hdr.Get("Allow") == "" {
		t.Fatalf("DELETE: %d Allow %q", status, hdr.Get("Allow"))
	}
	status, _, _ = do(t, mustRequest(t, http.MethodGet, th.srv.URL+th.Path()+"/elsewhere", ""))
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		t.Fatalf("GET of another path: %d", status)
	}
}

// An application's middleware in front of the hub sees each request,
// by method, with the method patterns of net/http's ServeMux.
func TestHub_MiddlewareByMethod(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing())
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	var mu sync.Mutex
	logged := func(name string, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, name)
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+h.Path(), logged("publish", h))
	mux.Handle("GET "+h.Path(), logged("subscribe", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer h.Shutdown(context.Background())
	th := &testHub{Hub: h, srv: srv, t: t}
	s := th.subscribe("match=x")
	id := th.mustPost("topic=x")
	if ev := s.next(t); ev.ID != id {
		t.Fatalf("got %+v", ev)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "subscribe,publish" {
		t.Fatalf("middleware saw %v", seen)
	}
}

// A subscriber that never reads must not delay the others nor block
// Publish; it is disconnected once its queue overflows, its connection
// having taken nothing for the stall grace, and its connection slot is
// freed.
func TestFanout_SlowSubscriberIsDisconnected(t *testing.T) {
	t.Parallel()
	th := newTestHub(t,
		mercure.WithLimits(mercure.Limits{QueueEvents: 8, MaxConnections: 2}), // 8 × 64 KiB
		// Long: the slow stream must be dropped for its queue, not cut by
		// its write deadline first (under -race, 8 publishes in lockstep
		// once took more than a 1 s timeout); the stall grace is short.
		mercure.WithLimits(mercure.Limits{WriteTimeout: time.Minute}), mercure.WithStallGrace(50*time.Millisecond),
	)
	// The slow client: a raw connection that sends its request and never reads.
	conn, err := net.Dial("tcp", th.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s?match=x HTTP/1.1\r\nHost: example.com\r\n\r\n", th.Path())
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("slow subscriber: %q %v", line, err)
	}
	fast := th.subscribe("match=x")

	// Publish in lockstep with the fast subscriber: every publish returns
	// and is delivered at once while the slow one's socket buffers and
	// queue fill up, until the hub drops it.
	data := strings.Repeat("y", 64<<10)
	start := time.Now()
	n := 0
	for ; th.Metrics().Overflows == 0; n++ {
		if time.Since(start) > testwait.Deadline {
			t.Fatalf("no overflow after %d updates", n)
		}
		if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data, ID: fmt.Sprint(n)}); err != nil {
			t.Fatal(err)
		}
		if ev := fast.next(t); ev.ID != fmt.Sprint(n) {
			t.Fatalf("fast subscriber got %s, want %d", ev.ID, n)
		}
	}
	if st := th.Metrics(); st.Overflows != 1 || st.Dispatched != uint64(n) {
		t.Fatalf("stats %+v, want 1 overflow and %d dispatched", st, n)
	}
	// The slow stream was dropped: its slot is free for a new subscriber.
	testwait.For(t, "the slow stream to be released", func() bool { return th.Metrics().Streams == 1 })
	th.subscribe("match=x")
}

func TestShutdown_EndsStreamsAndGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	th := &testHub{Hub: h, srv: srv, t: t}
	var subs []*subscription
	for range 5 {
		subs = append(subs, th.subscribe("match=x"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, s := range subs {
		select {
		case <-s.done:
		case <-time.After(testwait.Deadline):
			t.Fatal("a stream is still open after Shutdown")
		}
		if s.err != nil {
			t.Fatalf("stream cut instead of ended cleanly: %v", s.err)
		}
	}
	if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{"x"}}); !errors.Is(err, mercure.ErrHubClosed) {
		t.Fatalf("Publish after Shutdown: %v", err)
	}
	if s, res := th.trySubscribe(http.MethodGet, "match=x", ""); s != nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("subscribe after Shutdown: %v", res.Status)
	}
	if err := h.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	srv.CloseClientConnections()
	srv.Close()
	http.DefaultClient.CloseIdleConnections()
}

// A hub shutting down has one error, whichever entry point reports it:
// ErrHubClosed, which ErrHubClosed is another name of.
func TestShutdown_OneError(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, publishErr := h.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/a"}})
	for name, err := range map[string]error{"Publish": publishErr, "Live": h.Live(), "Ready": h.Ready()} {
		if !errors.Is(err, mercure.ErrHubClosed) {
			t.Errorf("%s: %v, want ErrHubClosed", name, err)
		}
	}
}

// SEC-9: tokens and cookies never reach the logs.
func TestSEC9_NoCredentialsInLogs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	th := newTestHub(t, mercure.WithLogger(log), mercure.WithLimits(mercure.Limits{QueueEvents: 1}))
	const secret = "s3cr3t-t0ken"
	req := mustRequest(t, http.MethodPost, th.endpoint(), "topic=x&access_token="+secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+secret)
	req.AddCookie(&http.Cookie{Name: "__Secure-mercure_access_token", Value: secret})
	do(t, req)
	s := th.subscribe("match=x&access_token="+secret, "Authorization", "Bearer "+secret, "Cookie", "__Secure-mercure_access_token="+secret)
	s.close()
	th.Shutdown(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(buf.String(), secret) {
		t.Fatalf("a credential was logged:\n%s", buf.String())
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func mustRequest(t testing.TB, method, u, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// A stream whose writer is stuck on a peer that stopped reading does not
// hold Shutdown: after a grace period its write is cut.
func TestShutdown_CutsStuckWriters(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, mercure.WithLimits(mercure.Limits{WriteTimeout: time.Hour}),
		mercure.WithLimits(mercure.Limits{QueueEvents: 1 << 20, QueueBytes: 1 << 30}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s?match=x HTTP/1.1\r\nHost: example.com\r\n\r\n", h.Path())
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("subscribe: %q %v", line, err)
	}
	data := strings.Repeat("y", 1<<20)
	for range 64 { // far more than the socket buffers hold
		if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// stallingStore's replays yield one event, then wait for their context, as
// a store behind a slow network would.
type stallingStore struct{ *memstore.Store }

func (s stallingStore) Replay(ctx context.Context, id string) (store.Backlog, error) {
	b, err := s.Store.Replay(ctx, id)
	events := b.Events
	b.Events = func(yield func(*store.Event, error) bool) {
		for e, err := range events {
			if !yield(e, err) {
				return
			}
			break
		}
		<-ctx.Done()
		yield(nil, ctx.Err())
	}
	return b, err
}

// Shutdown interrupts a replay in progress, and the stream still ends
// cleanly rather than being cut.
func TestShutdown_InterruptsReplay(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, mercure.WithStore(stallingStore{newMemoryStore(t, 10)}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	th := &testHub{Hub: h, srv: srv, t: t}
	for range 2 {
		if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	// subscribe returns once the headers are flushed; the replay then
	// stalls after its first event.
	s := th.subscribe("match=x&last_event_id=earliest")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	<-s.done
	if s.err != nil {
		t.Fatalf("stream cut instead of ended: %v", s.err)
	}
}

// AUTH-37: Limits.StreamLifetime ends streams, token or not; the client
// sees a clean end and resumes from its last event.
// The lifetime passes on a synctest bubble's clock: the update is
// published before it ends, however loaded the machine.
func TestAUTH37_MaxStreamLifetime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		th := startBubbleHub(t, nil, mercure.WithInsecurePublishing(), mercure.WithLimits(mercure.Limits{StreamLifetime: 300 * time.Millisecond}))
		s := th.subscribe("match=x")
		id := th.mustPost("topic=x")
		if ev := s.next(t); ev.ID != id {
			t.Fatalf("got %+v", ev)
		}
		select {
		case <-s.done:
			if s.err != nil {
				t.Fatalf("stream cut instead of ended: %v", s.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the stream outlived its maximum lifetime")
		}
	})
	if _, err := mercure.New(testHubURL, mercure.WithLimits(mercure.Limits{StreamLifetime: -time.Second})); !errors.Is(err, mercure.ErrInvalidOption) {
		t.Fatalf("negative lifetime: %v", err)
	}
}
