package mercure_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/memnet"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Test names and comments cite requirement IDs (TestAUTH37_…: AUTH-37),
// each one a rule of the Mercure specification; docs/requirements.md
// defines them.

// testHubURL is the public URL of the hubs under test. Tests reach them
// through an httptest server at another address: the public URL is
// configuration, not inferred from the request (DIS-1).
const testHubURL = "https://example.com/.well-known/mercure"

// testHub is a hub served by an httptest server.
type testHub struct {
	*mercure.Hub
	srv    *httptest.Server
	t      testing.TB
	client *http.Client // nil: http.DefaultClient
}

// httpClient is the client that reaches th.
func (th *testHub) httpClient() *http.Client {
	if th.client != nil {
		return th.client
	}
	return http.DefaultClient
}

// startBubbleHub is startHub for tests in a testing/synctest bubble: the
// hub is served over in-memory connections, so that the bubble's clock
// drives its timers (drain, keep-alives, write timeouts). Detached
// streams read their connections on goroutines (no poller can watch an
// in-memory connection). Call it inside the bubble.
func startBubbleHub(t testing.TB, setup func(*http.Server), opts ...mercure.Option) *testHub {
	t.Helper()
	h, err := mercure.New(testHubURL, append([]mercure.Option{mercure.WithoutPoller()}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(h.Path(), h)
	srv := memnet.Serve(t, mux, setup)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		srv.Close()
	})
	return &testHub{Hub: h, srv: &httptest.Server{URL: "http://hub.test"}, t: t, client: srv.Client}
}

// newTestHub starts a hub with insecure publishing (tests publish over HTTP
// without tokens, which this issue does not validate yet) plus opts.
func newTestHub(t testing.TB, opts ...mercure.Option) *testHub {
	t.Helper()
	return newTestHubAt(t, testHubURL, opts...)
}

// newTestHubAt is newTestHub with the hub URL hubURL.
func newTestHubAt(t testing.TB, hubURL string, opts ...mercure.Option) *testHub {
	t.Helper()
	return startHubAt(t, hubURL, nil, append([]mercure.Option{mercure.WithInsecurePublishing()}, opts...)...)
}

// startHub builds a hub at testHubURL from opts, mounts it at its path
// and serves it; setup, when not nil, adjusts the server before it
// starts. The hub and the server stop when the test ends.
func startHub(t testing.TB, setup func(*http.Server), opts ...mercure.Option) *testHub {
	t.Helper()
	return startHubAt(t, testHubURL, setup, opts...)
}

// startHubAt is startHub with the hub URL hubURL.
func startHubAt(t testing.TB, hubURL string, setup func(*http.Server), opts ...mercure.Option) *testHub {
	t.Helper()
	h, err := mercure.New(hubURL, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(h.Path(), h)
	srv := httptest.NewUnstartedServer(mux)
	if setup != nil {
		setup(srv.Config)
	}
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		srv.Close()
	})
	return &testHub{Hub: h, srv: srv, t: t}
}

// endpoint is the hub's address on the test server.
func (th *testHub) endpoint() string { return th.srv.URL + th.Path() }

// post publishes a raw form body and returns the response status, body and
// headers.
func (th *testHub) post(body string) (int, string, http.Header) {
	th.t.Helper()
	req, err := http.NewRequest(http.MethodPost, th.endpoint(), strings.NewReader(body))
	if err != nil {
		th.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return doWith(th.t, th.httpClient(), req)
}

// mustPost publishes and fails the test unless the hub answers 200.
func (th *testHub) mustPost(body string) string {
	th.t.Helper()
	status, id, _ := th.post(body)
	if status != http.StatusOK {
		th.t.Fatalf("publish %q: status %d: %s", body, status, id)
	}
	return id
}

func do(t testing.TB, req *http.Request) (int, string, http.Header) {
	t.Helper()
	return doWith(t, http.DefaultClient, req)
}

func doWith(t testing.TB, c *http.Client, req *http.Request) (int, string, http.Header) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// sseEvent is one event as a client parses it, with the raw field lines.
type sseEvent struct {
	ID, Type, Data, Retry string
	HasData               bool
	Lines                 []string // raw lines, without the blank terminator
}

// subscription is an open SSE stream.
type subscription struct {
	res      *http.Response
	events   chan sseEvent
	comments chan string
	done     chan struct{} // closed when the stream ends
	err      error         // why the stream ended (nil: a clean end), once done is closed
	cancel   context.CancelFunc
	position atomic.Pointer[string] // the id of the stream's last id-only block
}

// subscribe opens a stream with the raw query string q (e.g.
// "match=a&match=b") and fails the test unless the hub answers 200.
func (th *testHub) subscribe(q string, header ...string) *subscription {
	th.t.Helper()
	s, res := th.trySubscribe(http.MethodGet, q, "", header...)
	if s == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		th.t.Fatalf("subscribe %q: status %d: %s", q, res.StatusCode, b)
	}
	return s
}

// newRequest builds a request to the hub endpoint with the query rawQuery,
// a form body (if not empty) and header's name, value pairs.
func (th *testHub) newRequest(ctx context.Context, method, rawQuery, body string, header ...string) *http.Request {
	th.t.Helper()
	u := th.endpoint()
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		th.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	asBrowser(req)
	return req
}

// asBrowser gives a subscribe that carries a cookie the header that a
// browser sends from the hub's own pages, Sec-Fetch-Site: same-origin,
// unless it already says where it comes from: the hub refuses cookie and
// session streams from other sites (SEC-4).
func asBrowser(req *http.Request) {
	h := req.Header
	if req.Method != http.MethodPost && h.Get("Cookie") != "" && h.Get("Origin") == "" && h.Get("Sec-Fetch-Site") == "" && h.Get("Referer") == "" {
		h.Set("Sec-Fetch-Site", "same-origin")
	}
}

// trySubscribe opens a stream; it returns nil and the response (body
// unread) when the status is not 200. header holds name, value pairs.
func (th *testHub) trySubscribe(method, q, body string, header ...string) (*subscription, *http.Response) {
	th.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res, err := th.httpClient().Do(th.newRequest(ctx, method, q, body, header...))
	if err != nil {
		cancel()
		th.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		return nil, res
	}
	s := &subscription{
		res:      res,
		events:   make(chan sseEvent, 10000),
		comments: make(chan string, 100),
		done:     make(chan struct{}),
		cancel:   cancel,
	}
	go s.read()
	th.t.Cleanup(s.close)
	return s, res
}

// read parses the stream the way EventSource does, keeping raw lines. A
// block with only an id fires no event (it is the stream's starting
// position: EventSource records it as its last event id); its id goes
// to s.position. Blocks with a retry or a type but no data are passed on
// as events, for the tests that look at them, and so is a retry field
// that the stream's end leaves without its empty line.
func (s *subscription) read() {
	defer close(s.done)
	sc := bufio.NewScanner(s.res.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			switch {
			case len(ev.Lines) == 1 && ev.ID != "" && !ev.HasData:
				id := ev.ID // not &ev.ID: ev is reset below
				s.position.Store(&id)
			case len(ev.Lines) > 0:
				s.events <- ev
			}
			ev = sseEvent{}
			continue
		}
		if strings.HasPrefix(line, ":") {
			s.comments <- line
			continue
		}
		ev.Lines = append(ev.Lines, line)
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			ev.ID = value
		case "event":
			ev.Type = value
		case "retry":
			ev.Retry = value
		case "data":
			if ev.HasData {
				ev.Data += "\n"
			}
			ev.Data += value
			ev.HasData = true
		}
	}
	// A retry field applies as it is read, block ended or not: the hub
	// writes its farewell retry without an empty line after it (see
	// sse.KeepAlive), and the tests look at it as an event.
	if ev.Retry != "" && !ev.HasData {
		s.events <- ev
	}
	s.err = sc.Err()
}

func (s *subscription) close() {
	s.cancel()
	s.res.Body.Close()
	<-s.done
}

// next returns the next event, failing the test after a timeout.
func (s *subscription) next(t testing.TB) sseEvent {
	t.Helper()
	ev, ok := s.tryNext(t)
	if !ok {
		t.FailNow()
	}
	return ev
}

// tryNext is next for goroutines other than the test's own: it reports a
// failure with t.Error and returns false.
func (s *subscription) tryNext(t testing.TB) (sseEvent, bool) {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev, true
	case <-s.done:
		select {
		case ev := <-s.events:
			return ev, true
		default:
		}
		t.Error("stream ended while waiting for an event")
	case <-time.After(testwait.Deadline):
		t.Error("timed out waiting for an event")
	}
	return sseEvent{}, false
}

// header returns a response header of the stream.
func (s *subscription) header(name string) string { return s.res.Header.Get(name) }

// startMountedHub starts a hub mounted with Hub.Mount (its path, the
// subscriptions API, the metadata), stopped when the test ends.
func startMountedHub(t testing.TB, opts ...mercure.Option) *testHub {
	t.Helper()
	h, err := mercure.New(testHubURL, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	mux := http.NewServeMux()
	h.Mount(mux)
	return startHubServer(t, h, mux)
}

// startHubServer serves an already built hub through handler.
func startHubServer(t testing.TB, h *mercure.Hub, handler http.Handler) *testHub {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		srv.Close()
	})
	return &testHub{Hub: h, srv: srv, t: t}
}

// newMemoryStore returns a memory store keeping size events, whatever
// their size unless opts say otherwise.
func newMemoryStore(t testing.TB, size int, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(append([]memstore.Option{memstore.WithMaxEvents(size), memstore.WithMaxBytes(0)}, opts...)...)
	if err != nil {
		t.Fatalf("memstore.New: %v", err)
	}
	return s
}

// withHistory is a hub's option for a memory store keeping size events.
func withHistory(t testing.TB, size int) mercure.Option {
	return mercure.WithStore(newMemoryStore(t, size))
}

// ptr returns a pointer to v: new(v) needs Go 1.26, and the module
// supports Go 1.25.
func ptr[T any](v T) *T { return &v }

// descriptionAttr is the error_description attribute of a Bearer
// challenge, which every refusal carries (RFC 6750 section 3).
var descriptionAttr = regexp.MustCompile(`, error_description="[^"]*"`)

// bareChallenge is the Bearer challenge h without its error_description,
// for the tests of the codes and attributes the draft prescribes.
func bareChallenge(h string) string { return descriptionAttr.ReplaceAllString(h, "") }

// skipPosition reads the block a stream opened without a cursor starts
// with, an id and no data (its starting position), failing the test if it
// is not there, and returns the id.
func skipPosition(t testing.TB, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "id: ") {
		t.Fatalf("the stream starts with %q, %v; want its position, an id-only block", line, err)
	}
	if blank, err := r.ReadString('\n'); err != nil || blank != "\n" {
		t.Fatalf("the position block goes on with %q, %v; want its end", blank, err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(line, "id: "), "\n")
}

// publishUntilCut publishes updates of data on topic until th has no more
// than open streams: the others stall (their clients do not read) and are
// cut, by the write timeout say. It publishes the next update once the
// last one is dispatched and the queues are empty again (the socket
// buffers took it), and otherwise waits, on the hub, never for a fixed
// time. It returns the updates' ids.
func publishUntilCut(t testing.TB, th *testHub, topic, data string, open int) []string {
	t.Helper()
	var ids []string
	for i := 0; th.Metrics().Streams > open; i++ {
		dispatched := th.Metrics().Dispatched
		id, err := th.Publish(context.Background(), mercure.Update{Topics: []string{topic}, Data: data, ID: fmt.Sprintf("urn:stall:%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		testwait.For(t, "the update written, or the stalled streams cut", func() bool {
			st := th.Metrics()
			return st.Streams <= open || st.Dispatched > dispatched && st.QueuedBytes == 0
		})
	}
	return ids
}
