package client_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/memstore"
)

// testHubURL is the public URL of the hubs under test; clients reach them
// at the httptest server's address.
const testHubURL = "https://example.com/.well-known/mercure"

// testHub is a hub served by an httptest server.
type testHub struct {
	*mercure.Hub
	srv *httptest.Server
}

// endpoint is the hub's address on the test server.
func (th *testHub) endpoint() string { return th.srv.URL + th.Path() }

// withHistory is a hub's option for a memory store keeping size events.
func withHistory(t testing.TB, size int) mercure.Option {
	t.Helper()
	s, err := memstore.New(memstore.WithMaxEvents(size))
	if err != nil {
		t.Fatal(err)
	}
	return mercure.WithStore(s)
}

// startHub serves a hub built with opts (plus the test URL and insecure
// publishing) until the test ends; it is mounted with Hub.Mount, so that
// the metadata is served too.
func startHub(t testing.TB, opts ...mercure.Option) *testHub {
	t.Helper()
	return startSecureHub(t, append(opts, mercure.WithInsecurePublishing())...)
}

// startSecureHub is startHub without insecure publishing.
func startSecureHub(t testing.TB, opts ...mercure.Option) *testHub {
	t.Helper()
	var srv *httptest.Server
	h := serveHub(t, opts, func(hd http.Handler) (close func()) {
		srv = httptest.NewServer(hd)
		return srv.Close
	})
	return &testHub{Hub: h, srv: srv}
}

// serveHub builds a hub with opts, mounted with Hub.Mount, and serves it
// with serve until the test ends, when it shuts the hub down, then closes
// the server with what serve returned.
func serveHub(t testing.TB, opts []mercure.Option, serve func(http.Handler) (close func())) *mercure.Hub {
	t.Helper()
	h, err := mercure.New(testHubURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Mount(mux)
	closeServer := serve(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		closeServer()
	})
	return h
}

// fastClient reconnects after a millisecond: tests force many reconnections.
func fastClient() *client.Client {
	return &client.Client{ReconnectDelay: time.Millisecond, MinReconnectDelay: time.Millisecond, MaxReconnectDelay: 50 * time.Millisecond}
}

// publish publishes in process and fails the test on error.
func publish(t testing.TB, h *mercure.Hub, u mercure.Update) string {
	t.Helper()
	id, err := h.Publish(context.Background(), u)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	return id
}

// cuttingProxy forwards TCP connections to a backend and cuts each after a
// random number of bytes from the backend, often in the middle of an
// event, so that clients must reconnect and resume.
type cuttingProxy struct {
	ln       net.Listener
	backend  string
	min, max int // bytes forwarded before a cut
	cuts     atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func newCuttingProxy(t testing.TB, backend string, minBytes, maxBytes int) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{ln: ln, backend: backend, min: minBytes, max: maxBytes, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *cuttingProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttingProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *cuttingProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *cuttingProxy) forward(down net.Conn) {
	defer p.wg.Done()
	defer down.Close()
	up, err := net.Dial("tcp", p.backend)
	if err != nil {
		return
	}
	defer up.Close()
	p.track(down, true)
	defer p.track(down, false)
	p.wg.Add(1)
	go func() { // requests: forwarded whole
		defer p.wg.Done()
		io.Copy(up, down)
		up.Close()
	}()
	budget := int64(p.min + rand.IntN(p.max-p.min+1))
	n, err := io.CopyN(down, up, budget)
	if n == budget && err == nil {
		p.cuts.Add(1)
	}
}

func (p *cuttingProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// collect ranges over seq until stop says so, failing on any error.
func collect(t testing.TB, seq func(func(client.Event, error) bool), stop func([]client.Event) bool) []client.Event {
	t.Helper()
	var got []client.Event
	for ev, err := range seq {
		if err != nil {
			t.Fatalf("subscription ended: %v", err)
		}
		got = append(got, ev)
		if stop(got) {
			break
		}
	}
	return got
}

var errTimeout = errors.New("test timed out")

// testContext is cancelled after d or when the test ends.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeoutCause(context.Background(), d, errTimeout)
	t.Cleanup(cancel)
	return ctx
}

// ptr returns a pointer to v: new(v) needs Go 1.26, and the module
// supports Go 1.25.
func ptr[T any](v T) *T { return &v }
