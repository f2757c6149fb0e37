package mercure_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/alone"
	"github.com/mercurekit/mercure/internal/testwait"
)

// newDetachedHub starts a hub whose HTTP/1.1 streams are detached, whatever
// the default of the test run.
func newDetachedHub(t testing.TB, opts ...mercure.Option) *testHub {
	t.Helper()
	return newTestHub(t, append([]mercure.Option{mercure.WithDetachedStreams()}, opts...)...)
}

// rawStream is a stream read off its connection: HTTP/1.1, chunk by chunk,
// with no goroutine on the client's side.
type rawStream struct {
	conn     net.Conn
	br       *bufio.Reader
	header   http.Header
	close    bool   // the response said Connection: close
	position string // the id of the block the stream started with, if any
}

// dialStream opens a stream of query on a connection of its own and reads
// its status line and headers; it fails the test unless the hub answers
// 200 with a chunked body.
func dialStream(t testing.TB, th *testHub, query string) *rawStream {
	t.Helper()
	rs, err := tryDialStream(th, query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.conn.Close() })
	return rs
}

func tryDialStream(th *testHub, query string) (*rawStream, error) {
	conn, err := net.Dial("tcp", th.srv.Listener.Addr().String())
	if err != nil {
		return nil, err
	}
	rs := &rawStream{conn: conn, br: bufio.NewReaderSize(conn, 512)}
	fmt.Fprintf(conn, "GET %s?%s HTTP/1.1\r\nHost: example.com\r\n\r\n", th.Path(), query)
	res, err := http.ReadResponse(rs.br, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if res.StatusCode != http.StatusOK || len(res.TransferEncoding) != 1 || res.TransferEncoding[0] != "chunked" {
		conn.Close()
		return nil, fmt.Errorf("status %d, transfer encoding %q", res.StatusCode, res.TransferEncoding)
	}
	rs.header, rs.close = res.Header, res.Close
	if !strings.Contains(query, "last_event_id") {
		// A stream without a cursor starts with its position.
		c, err := rs.chunk()
		if err != nil || !strings.HasPrefix(c, "id: ") || !strings.HasSuffix(c, "\n\n") || strings.Contains(c, "data:") {
			conn.Close()
			return nil, fmt.Errorf("first chunk %q, %v: want the stream's position", c, err)
		}
		rs.position = strings.TrimSuffix(strings.TrimPrefix(c, "id: "), "\n\n")
	}
	return rs, nil
}

// chunk reads the next chunk of the body; io.EOF after the last one.
func (rs *rawStream) chunk() (string, error) {
	rs.conn.SetReadDeadline(time.Now().Add(testwait.Deadline))
	line, err := rs.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.ParseInt(strings.TrimSuffix(line, "\r\n"), 16, 32)
	if err != nil {
		return "", fmt.Errorf("chunk size %q: %v", line, err)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(rs.br, b); err != nil {
		return "", err
	}
	if string(b[n:]) != "\r\n" {
		return "", fmt.Errorf("chunk of %d bytes not followed by CRLF: %q", n, b)
	}
	if n == 0 {
		return "", io.EOF
	}
	return string(b[:n]), nil
}

// mustChunk reads the next chunk, failing the test on an error.
func (rs *rawStream) mustChunk(t testing.TB) string {
	t.Helper()
	c, err := rs.chunk()
	if err != nil {
		t.Fatalf("reading a chunk: %v", err)
	}
	return c
}

// An idle detached stream holds no goroutine: a few hundred streams cost
// the hub far fewer goroutines than streams, and still get their events.
func TestDetached_IdleStreamsHoldNoGoroutine(t *testing.T) {
	if !alone.InProcess(t) { // it counts the process's goroutines
		return
	}
	th := newDetachedHub(t)
	before := runtime.NumGoroutine()
	const n = 200
	streams := make([]*rawStream, n)
	for i := range streams {
		streams[i] = dialStream(t, th, "match=x")
	}
	testwait.For(t, "the handlers to return", func() bool { return runtime.NumGoroutine()-before < n/4 })
	id := th.mustPost("topic=x&data=hello")
	for i, rs := range streams {
		if c := rs.mustChunk(t); !strings.Contains(c, "id: "+id+"\n") {
			t.Fatalf("stream %d got %q", i, c)
		}
	}
	// Writers and the poller count, streams do not.
	if extra := runtime.NumGoroutine() - before; extra >= n/4 {
		t.Fatalf("%d more goroutines for %d idle streams", extra, n)
	}
	if got := th.Metrics().Streams; got != n {
		t.Fatalf("%d streams, want %d", got, n)
	}
}

// Events and keep-alives reach a detached stream as chunks; its response
// says that the connection ends with it.
func TestDetached_EventsAndKeepAlives(t *testing.T) {
	t.Parallel()
	th := newDetachedHub(t, mercure.WithLimits(mercure.Limits{KeepAlive: 50 * time.Millisecond}))
	rs := dialStream(t, th, "match=x")
	if !rs.close {
		t.Fatal("no Connection: close")
	}
	if got := rs.header.Get("Content-Type"); got != "text/event-stream" {
		t.Fatalf("Content-Type: %q", got)
	}
	for range 2 {
		if c := rs.mustChunk(t); !strings.HasPrefix(c, ":") {
			t.Fatalf("got %q, want a keep-alive comment", c)
		}
	}
	id := th.mustPost("topic=x&data=a%0Ab")
	for {
		c := rs.mustChunk(t)
		if strings.HasPrefix(c, ":") {
			continue
		}
		if want := "id: " + id + "\ndata: a\ndata: b\n\n"; c != want {
			t.Fatalf("got %q, want %q", c, want)
		}
		break
	}
}

// Through the Go client: events, several subscribers, Last-Event-ID.
func TestDetached_ReplayThenLive(t *testing.T) {
	t.Parallel()
	th := newDetachedHub(t)
	first := th.mustPost("topic=x&data=1")
	second := th.mustPost("topic=x&data=2")
	s := th.subscribe("match=x&last_event_id=" + url.QueryEscape(first))
	if ev := s.next(t); ev.ID != second {
		t.Fatalf("replayed %+v, want %s", ev, second)
	}
	third := th.mustPost("topic=x&data=3")
	if ev := s.next(t); ev.ID != third {
		t.Fatalf("got %+v, want %s", ev, third)
	}
}

// A peer that stops reading is cut once a write has waited for the write
// timeout, as a goroutine stream is: its slot is freed, without an
// overflow.
func TestDetached_WriteTimeout(t *testing.T) {
	t.Parallel()
	th := newDetachedHub(t, mercure.WithLimits(mercure.Limits{WriteTimeout: 200 * time.Millisecond}),
		mercure.WithLimits(mercure.Limits{QueueEvents: 1 << 20, QueueBytes: 1 << 30, MaxQueuedBytes: 1 << 31}))
	dialStream(t, th, "match=x") // never read
	publishUntilCut(t, th, "x", strings.Repeat("y", 1<<20), 0)
	if st := th.Metrics(); st.Overflows != 0 {
		t.Fatalf("stats %+v, want no overflow", st)
	}
}

// A stream whose queue overflows is dropped; the others go on.
func TestDetached_Overflow(t *testing.T) {
	t.Parallel()
	th := newDetachedHub(t, mercure.WithLimits(mercure.Limits{QueueEvents: 8}), mercure.WithLimits(mercure.Limits{WriteTimeout: time.Hour}),
		mercure.WithStallGrace(50*time.Millisecond)) // past its queue's bound, stalled that long: it overflows
	slow := dialStream(t, th, "match=x") // never read
	fast := th.subscribe("match=x")
	data := strings.Repeat("y", 64<<10)
	start := time.Now()
	for i := 0; th.Metrics().Overflows == 0; i++ {
		if time.Since(start) > testwait.Deadline {
			t.Fatalf("no overflow after %d updates", i)
		}
		if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data, ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if ev := fast.next(t); ev.ID != fmt.Sprint(i) {
			t.Fatalf("fast subscriber got %s, want %d", ev.ID, i)
		}
	}
	testwait.For(t, "the slow stream to end", func() bool { return th.Metrics().Streams == 1 })
	// Its connection is closed, not ended cleanly: drain it to the cut.
	slow.conn.SetReadDeadline(time.Now().Add(testwait.Deadline))
	if _, err := io.Copy(io.Discard, slow.br); err != nil {
		t.Fatalf("the slow stream's connection is still open: %v", err)
	}
}

// Streams end with their maximum lifetime, cleanly: the chunked body has
// its last chunk.
func TestDetached_Expiry(t *testing.T) {
	t.Parallel()
	th := newDetachedHub(t, mercure.WithLimits(mercure.Limits{StreamLifetime: 200 * time.Millisecond}))
	rs := dialStream(t, th, "match=x")
	for {
		_, err := rs.chunk()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("stream cut instead of ended: %v", err)
		}
	}
	testwait.For(t, "the stream to be released", func() bool { return th.Metrics().Streams == 0 })
}

// A client that leaves frees its stream at once, without any write to
// its connection telling the hub.
func TestDetached_ClientGone(t *testing.T) {
	t.Parallel()
	th := newDetachedHub(t, mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}))
	for range 3 {
		dialStream(t, th, "match=x").conn.Close()
	}
	rs := dialStream(t, th, "match=x")
	testwait.For(t, "the closed streams to be released", func() bool { return th.Metrics().Streams == 1 })
	id := th.mustPost("topic=x")
	if c := rs.mustChunk(t); !strings.Contains(c, id) {
		t.Fatalf("got %q", c)
	}
	// A client that sends anything more (a pipelined request) is gone too.
	fmt.Fprintf(rs.conn, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	testwait.For(t, "the stream to end", func() bool { return th.Metrics().Streams == 0 })
}

// A request pipelined behind the subscription: the connection cannot be
// handed over, and is closed.
func TestDetached_PipelinedRequest(t *testing.T) {
	t.Parallel()
	th := newDetachedHub(t)
	conn, err := net.Dial("tcp", th.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := fmt.Sprintf("GET %s?match=x HTTP/1.1\r\nHost: example.com\r\n\r\n", th.Path())
	fmt.Fprint(conn, req+req)
	conn.SetReadDeadline(time.Now().Add(testwait.Deadline))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("connection not closed: %v", err)
	}
	testwait.For(t, "the stream to be released", func() bool { return th.Metrics().Streams == 0 })
}

// Shutdown ends detached streams cleanly: the Go client reads the end of
// the chunked body, without error, and no goroutine is left.
func TestDetached_Shutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(), mercure.WithDetachedStreams())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	th := &testHub{Hub: h, srv: srv, t: t}
	var subs []*subscription
	for range 5 {
		subs = append(subs, th.subscribe("match=x"))
	}
	id := th.mustPost("topic=x")
	for _, s := range subs {
		if ev := s.next(t); ev.ID != id {
			t.Fatalf("got %+v", ev)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, s := range subs {
		<-s.done
		if s.err != nil {
			t.Fatalf("stream cut instead of ended cleanly: %v", s.err)
		}
	}
	srv.Close()
	http.DefaultClient.CloseIdleConnections()
}

// With a write delay, updates that arrive within the delay of the last
// write go out together, in one chunk; the first goes out at once.
func TestDetached_WriteDelay(t *testing.T) {
	t.Parallel()
	th := newDetachedHub(t, mercure.WithLimits(mercure.Limits{WriteDelay: time.Second}), mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}))
	rs := dialStream(t, th, "match=x")
	first := th.mustPost("topic=x")
	if c := rs.mustChunk(t); strings.Count(c, "\n\n") != 1 || !strings.Contains(c, first) {
		t.Fatalf("first chunk %q", c)
	}
	second, third := th.mustPost("topic=x"), th.mustPost("topic=x")
	if c := rs.mustChunk(t); strings.Count(c, "\n\n") != 2 || !strings.Contains(c, second) || !strings.Contains(c, third) {
		t.Fatalf("second chunk %q, want both updates", c)
	}
}

// logBuffer collects a hub's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{&l.buf, &l.mu}, nil))
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// HTTP/2 streams are written by their goroutines; the hub says so
// once.
func TestDetached_HTTP2FallsBack(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h, err := mercure.New(testHubURL, mercure.WithDetachedStreams(), mercure.WithLogger(logs.logger()))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer h.Shutdown(context.Background())
	th := &testHub{Hub: h, srv: srv, t: t}
	for i := range 2 {
		res, err := srv.Client().Get(th.endpoint() + "?match=x")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.ProtoMajor != 2 || res.StatusCode != http.StatusOK || res.Header.Get("Connection") != "" {
			t.Fatalf("got %s %d, Connection %q", res.Proto, res.StatusCode, res.Header.Get("Connection"))
		}
		if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, ID: fmt.Sprint("h2-", i)}); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(res.Body)
		skipPosition(t, br)
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprint("id: h2-", i, "\n") {
			t.Fatalf("got %q, %v", line, err)
		}
	}
	if n := logs.count("other than HTTP/1.1"); n != 1 {
		t.Fatalf("%d log lines about HTTP/2, want 1", n)
	}
}

// plainWriter hides the ResponseWriter it wraps: no Hijack, no Unwrap.
type plainWriter struct{ w http.ResponseWriter }

func (p plainWriter) Header() http.Header         { return p.w.Header() }
func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p plainWriter) WriteHeader(code int)        { p.w.WriteHeader(code) }
func (p plainWriter) Flush()                      { p.w.(http.Flusher).Flush() }

// Behind middleware that cannot give the connection up, streams are
// written by their goroutines; the hub says so once.
func TestDetached_MiddlewareFallsBack(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(),
		mercure.WithDetachedStreams(), mercure.WithLogger(logs.logger()))
	if err != nil {
		t.Fatal(err)
	}
	th := startHubServer(t, h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(plainWriter{w}, r)
	}))
	a, b := th.subscribe("match=x"), th.subscribe("match=x")
	if got := a.header("Connection"); got != "" {
		t.Fatalf("Connection: %q on a stream that keeps net/http", got)
	}
	id := th.mustPost("topic=x")
	for _, s := range []*subscription{a, b} {
		if ev := s.next(t); ev.ID != id {
			t.Fatalf("got %+v", ev)
		}
	}
	if n := logs.count("cannot be hijacked"); n != 1 {
		t.Fatalf("%d log lines about middleware, want 1", n)
	}
}

// Streams that connect and leave, many thousands of times, leave no
// goroutine nor stream behind.
func TestDetached_ChurnLeaksNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("20 000 connections")
	}
	if os.Getenv("MERCURE_TEST_GOROUTINE_STREAMS") == "1" {
		t.Skip("run by the pass in the default mode: the same test, and 20 000 more ports in TIME_WAIT")
	}
	if !alone.InProcess(t) { // goleak.VerifyNone looks at the whole process
		return
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(), mercure.WithDetachedStreams(),
		mercure.WithLimits(mercure.Limits{MaxConnections: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	th := &testHub{Hub: h, srv: srv, t: t}
	const total, wave = 20000, 250
	var failed sync.Once
	for done := 0; done < total; done += wave {
		var wg sync.WaitGroup
		for i := range wave {
			wg.Go(func() {
				rs, err := tryDialStream(th, "match=x")
				if err != nil {
					failed.Do(func() { t.Errorf("stream %d: %v", done+i, err) })
					return
				}
				if i%2 == 0 {
					// Half read an event first; half leave at once.
					if _, err := rs.chunk(); err != nil {
						failed.Do(func() { t.Errorf("stream %d: %v", done+i, err) })
					}
				}
				rs.conn.Close()
			})
		}
		// Streams get events while others come and go.
		waved := make(chan struct{})
		go func() {
			wg.Wait()
			close(waved)
		}()
	publish:
		for {
			select {
			case <-waved:
				break publish
			case <-time.After(5 * time.Millisecond):
				th.mustPost("topic=x")
			}
		}
		if t.Failed() {
			break
		}
	}
	testwait.For(t, "every stream to be released", func() bool { return th.Metrics().Streams == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Close()
}

// HTTP/1.1 over TLS is detached too: the stream writes through the TLS
// connection, and the poller watches the socket under it.
func TestDetached_TLS(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, mercure.WithDetachedStreams())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h) // no HTTP/2
	defer srv.Close()
	defer h.Shutdown(context.Background())
	res, err := srv.Client().Get(srv.URL + h.Path() + "?match=x")
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtoMajor != 1 || !res.Close {
		t.Fatalf("%s, Close %v: not a detached HTTP/1.1 stream", res.Proto, res.Close)
	}
	if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, ID: "tls"}); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Body)
	skipPosition(t, br)
	if line, err := br.ReadString('\n'); err != nil || line != "id: tls\n" {
		t.Fatalf("got %q, %v", line, err)
	}
	res.Body.Close()
	srv.Client().CloseIdleConnections()
	testwait.For(t, "the stream to be released", func() bool { return h.Metrics().Streams == 0 })
}
