package mercure_test

// The request plumbing of request.go, through both endpoints that read a
// body (a publish, a QUERY subscription): bodies that never finish (SEC-6,
// Limits.BodyTimeout), and bodies that cannot be read as the UTF-8 forms
// they must be (PUB-1, SUB-2).

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure"
)

// bodyTimeout is the short Limits.BodyTimeout of these tests.
const bodyTimeout = 300 * time.Millisecond

// hungRequest writes, on a new connection to addr, a request whose body
// never completes: chunked without the last chunk, or shorter than its
// Content-Length. The test closes the connection when it ends.
func hungRequest(t *testing.T, addr, method string, chunked bool, token string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const body = "topic=urn%3Ahung&match=urn%3Ahung"
	var b strings.Builder
	fmt.Fprintf(&b, "%s /.well-known/mercure HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/x-www-form-urlencoded\r\n", method)
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	if chunked {
		fmt.Fprintf(&b, "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(body), body)
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body)+100, body)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	return c
}

// answeredThenClosed reads the hub's response on c and then the end of the
// connection: it returns the status, or an error when either does not come
// within a generous delay.
func answeredThenClosed(c net.Conn) (int, error) {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, fmt.Errorf("no response: %w", err)
	}
	if _, err := io.ReadAll(res.Body); err != nil {
		return 0, fmt.Errorf("reading the response: %w", err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusRequestTimeout && res.Header.Get("Content-Type") != "application/problem+json" {
		return 0, fmt.Errorf("408 with Content-Type %q, want a problem document", res.Header.Get("Content-Type"))
	}
	if n, err := br.Read(make([]byte, 1)); n > 0 || !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("status %d, then the connection stayed open (%d bytes, %v)", res.StatusCode, n, err)
	}
	return res.StatusCode, nil
}

// Many clients whose bodies never finish, POST and QUERY, chunked and
// short, with and without a token: once the body timeout passes the hub
// answers each of them and closes its connection, and meanwhile a
// legitimate publish and subscribe work.
func TestSEC6_BodyTimeoutFreesHungRequests(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithLimits(mercure.Limits{BodyTimeout: bodyTimeout}))
	addr := th.srv.Listener.Addr().String()
	pubTok := pubToken(t, detail("publish", exactTopic("*")))
	subTok := subToken(t, detail("subscribe", exactTopic("*")))

	type hung struct {
		name string
		conn net.Conn
		// want: 408, or for a request without a token also the 401 the
		// hub may answer before it reads the body.
		tokened bool
	}
	var all []hung
	for i := range 200 {
		method, token := http.MethodPost, pubTok
		if i%2 == 1 {
			method, token = "QUERY", subTok
		}
		chunked := i%4 >= 2
		tokened := i%8 < 4
		if !tokened {
			token = ""
		}
		name := fmt.Sprintf("%s chunked=%v token=%v #%d", method, chunked, tokened, i)
		all = append(all, hung{name, hungRequest(t, addr, method, chunked, token), tokened})
	}

	// Meanwhile, legitimate clients are served.
	s := th.subscribe("match=urn%3Alegit", "Authorization", "Bearer "+subTok)
	status, id, _ := th.request(http.MethodPost, "", "topic=urn%3Alegit&data=hello", "Authorization", "Bearer "+pubTok)
	if status != http.StatusOK {
		t.Fatalf("legitimate publish: %d %s", status, id)
	}
	if ev := s.next(t); ev.ID != id || ev.Data != "hello" {
		t.Fatalf("legitimate subscriber got %+v", ev)
	}

	var wg sync.WaitGroup
	errs := make([]error, len(all))
	for i, h := range all {
		wg.Go(func() {
			status, err := answeredThenClosed(h.conn)
			switch {
			case err != nil:
				errs[i] = err
			case status != http.StatusRequestTimeout && (h.tokened || status != http.StatusUnauthorized):
				errs[i] = fmt.Errorf("status %d", status)
			}
		})
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			if failed++; failed <= 5 {
				t.Errorf("%s: %v", all[i].name, err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d hung requests were not answered and closed", failed, len(all))
	}
}

// The body timeout bounds the body alone: a QUERY stream whose body came
// in time lives on well past it, over HTTP/1.1 and HTTP/2, while a QUERY
// whose body does not come gets 408. Over HTTP/2 only that stream is
// reset: the connection goes on carrying the client's other requests.
// The test runs in a synctest bubble, over in-memory connections (HTTP/2
// without TLS), so the timeout passes on the bubble's clock.
func TestSEC6_BodyTimeoutSparesStreams(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("HTTP/2=%v", h2), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { testBodyTimeoutSparesStreams(t, h2) })
		})
	}
}

func testBodyTimeoutSparesStreams(t *testing.T, h2 bool) {
	var protocols http.Protocols
	if h2 {
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP1(true)
	}
	th := startBubbleHub(t, func(srv *http.Server) { srv.Protocols = &protocols }, mercure.WithLimits(mercure.Limits{BodyTimeout: bodyTimeout}))
	client := th.httpClient()
	client.Transport.(*http.Transport).Protocols = &protocols
	var reused []bool
	trace := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) },
	})
	query := func(body io.Reader) *http.Request {
		req, err := http.NewRequestWithContext(trace, "QUERY", th.endpoint(), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req
	}

	// A stream whose body came in time.
	res, err := client.Do(query(strings.NewReader("match=urn%3Aq")))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || (h2 && res.ProtoMajor != 2) {
		t.Fatalf("QUERY: %s %d", res.Proto, res.StatusCode)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	// A QUERY whose body never ends.
	ctx, cancel := context.WithTimeout(trace, 30*time.Second) // fail, do not hang, without a timeout
	defer cancel()
	hung, err := client.Do(query(newEndlessBody(ctx, "match=urn%3Ahung")).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	hung.Body.Close()
	if hung.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("QUERY with a body that never ends: %d, want 408", hung.StatusCode)
	}

	time.Sleep(3 * bodyTimeout) // on the bubble's clock: the stream's body deadline, had it been kept, is long past
	id, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"urn:q"}, Data: "late"})
	if err != nil {
		t.Fatal(err)
	}
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			if l == "id: "+id {
				break wait
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event on the stream")
		}
	}
	if h2 {
		// The connection that carried the 408 carries the next request.
		if _, err := client.Do(query(strings.NewReader("match=urn%3Aq2"))); err != nil {
			t.Fatal(err)
		}
		if len(reused) != 3 || !reused[1] || !reused[2] {
			t.Fatalf("connection reused per request: %v; want the HTTP/2 connection kept after the 408", reused)
		}
	}
}

// endlessBody is a request body that yields data, then nothing more until
// ctx ends or the client's transport closes it.
type endlessBody struct {
	data   []byte
	ctx    context.Context
	closed chan struct{}
	once   sync.Once
}

func newEndlessBody(ctx context.Context, data string) *endlessBody {
	return &endlessBody{data: []byte(data), ctx: ctx, closed: make(chan struct{})}
}

func (b *endlessBody) Read(p []byte) (int, error) {
	if len(b.data) > 0 {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	select {
	case <-b.ctx.Done():
	case <-b.closed:
	}
	return 0, io.ErrUnexpectedEOF
}

func (b *endlessBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// Behind a middleware whose ResponseWriter hides the read deadlines, the
// hub still works, and says once why it cannot bound body reads.
func TestSEC6_BodyTimeoutUnsupportedWarnsOnce(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, nil))
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(), mercure.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	th := startHubServer(t, h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(opaqueWriter{w}, r)
	}))
	th.mustPost("topic=urn%3Aa&data=1")
	th.mustPost("topic=urn%3Aa&data=2")
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(buf.String(), "cannot set read deadlines"); n != 1 {
		t.Fatalf("%d warnings about read deadlines, want 1:\n%s", n, buf.String())
	}
}

// opaqueWriter is middleware's ResponseWriter without Unwrap: it hides the
// deadlines of the writer it wraps, but flushes.
type opaqueWriter struct{ http.ResponseWriter }

func (w opaqueWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// A body the hub cannot read as the UTF-8 form it must be (PUB-1, SUB-2)
// is refused with 415, never guessed at: with a Content-Encoding other
// than identity its bytes would be parsed as a form still compressed, and
// with a charset other than UTF-8 its names and values would be misread.
// Publish and QUERY alike; nothing refused is delivered.
func TestPUB1_SUB2_BodyIsReadAsDeclared(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=*")
	form := "topic=" + pubTopic + "&data=x&match=" + subEnc(pubTopic)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, form)
	zw.Close()
	cases := []struct {
		name, contentType, encoding, body string
		refused                           string // in the 415's detail; empty: accepted
	}{
		{"gzip", pubFormType, "gzip", gz.String(), `"gzip"`},
		{"br", pubFormType, "br", form, `"br"`},
		{"identity then gzip", pubFormType, "identity, gzip", gz.String(), `"gzip"`},
		{"identity", pubFormType, "identity", form, ""},
		{"Latin-1", pubFormType + "; charset=iso-8859-1", "", form, `"iso-8859-1"`},
		{"UTF-16", pubFormType + "; charset=UTF-16", "", form, `"UTF-16"`},
		{"UTF-8", pubFormType + "; charset=UTF-8", "", form, ""},
		{"UTF-8 quoted", pubFormType + `; charset="utf-8"`, "", form, ""},
		{"utf8", pubFormType + "; charset=utf8", "", form, ""},
	}
	for _, c := range cases {
		var hdr []string
		if c.encoding != "" {
			hdr = []string{"Content-Encoding", c.encoding}
		}
		checkRefusal := func(t *testing.T, status int, body string, header http.Header) {
			t.Helper()
			if status != http.StatusUnsupportedMediaType {
				t.Fatalf("status %d, want 415; body %q", status, body)
			}
			var doc struct{ Detail string }
			if err := json.Unmarshal([]byte(body), &doc); err != nil || header.Get("Content-Type") != "application/problem+json" ||
				!strings.Contains(doc.Detail, c.refused) {
				t.Errorf("415 %s %q, want a problem document naming %s", header.Get("Content-Type"), body, c.refused)
			}
			if got := header.Get("Accept-Encoding"); c.encoding != "" && got != "identity" {
				t.Errorf("Accept-Encoding %q, want identity (RFC 9110, section 15.5.16)", got)
			}
		}
		t.Run("POST "+c.name, func(t *testing.T) {
			r := pubRequest(t, th, c.contentType, "", c.body, hdr...)
			if c.refused == "" {
				pubNext(t, s, r.wantOK(t))
				return
			}
			checkRefusal(t, r.status, r.body, r.header)
			pubWantNothing(t, th, pubTopic, s)
		})
		t.Run("QUERY "+c.name, func(t *testing.T) {
			th := subFor(th, t)
			sub, res := th.trySubscribe("QUERY", "", c.body, append([]string{"Content-Type", c.contentType}, hdr...)...)
			if c.refused == "" {
				if sub == nil {
					t.Fatalf("status %d, want 200", res.StatusCode)
				}
				sub.close()
				return
			}
			if sub != nil {
				sub.close()
				t.Fatal("status 200, want 415")
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			checkRefusal(t, res.StatusCode, string(b), res.Header)
		})
	}
}
