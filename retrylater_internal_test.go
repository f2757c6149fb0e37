package mercure

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure/internal/memring"
	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/store"
)

// The subscribe endpoint's temporary refusals (429, 503) are answered to
// a client that prefers an event stream (a browser's EventSource) as a
// 200 stream that says why in a comment, sets the retry delay and ends,
// since an EventSource gives up for good on any other status; every
// other client gets the status, Retry-After and a problem document. See
// retrylater.go.

// retryBody is the body of a deferred refusal: a comment with the
// status and reason, a retry field, nothing else (no id, no data).
// No empty line: it would end a block, which parsers that dispatch every
// block (fetch-event-source) report as a message with empty data.
var retryBody = regexp.MustCompile(`^: (\d{3}) ([^\n]+)\nretry: (\d+)\n$`)

// subscribeWith serves a GET subscribe to h with Accept accept (none
// when it is "-") and the other header's name, value pairs.
func subscribeWith(h *Hub, accept string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, h.Path()+"?match=urn%3Aa", nil)
	if accept != "-" {
		r.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// wantRefusal fails unless w is the answer to a subscribe refused for now
// with status and reason: deferred (a stream that retries after about
// the Retry-After delay) or the problem document with Retry-After.
func wantRefusal(t *testing.T, w *httptest.ResponseRecorder, deferred bool, status int, reason string) {
	t.Helper()
	body := w.Body.String()
	if !deferred {
		if w.Code != status || w.Header().Get("Content-Type") != "application/problem+json" ||
			w.Header().Get("Retry-After") != retryAfter[status] || !strings.Contains(body, reason) {
			t.Fatalf("got %d %q Retry-After %q %q, want %d with Retry-After %s and a problem saying %q",
				w.Code, w.Header().Get("Content-Type"), w.Header().Get("Retry-After"), body, status, retryAfter[status], reason)
		}
		return
	}
	m := retryBody.FindStringSubmatch(body)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/event-stream" || m == nil ||
		m[1] != strconv.Itoa(status) || m[2] != reason {
		t.Fatalf("got %d %q %q, want 200 text/event-stream with only \": %d %s\" and a retry", w.Code, w.Header().Get("Content-Type"), body, status, reason)
	}
	if w.Header().Get("Mercure-Last-Event-ID") != "" {
		t.Fatalf("a deferred refusal names a cursor: %q", w.Header().Get("Mercure-Last-Event-ID"))
	}
	// The delay Retry-After would say, ± half of it.
	ms, _ := strconv.Atoi(m[3])
	d := retryDelay(status)
	if got := time.Duration(ms) * time.Millisecond; got < d/2 || got >= d*3/2 {
		t.Fatalf("retry %v, want %v ± %v", got, d, d/2)
	}
}

// failingAuthorizer is an application's session lookup whose database is
// down while down holds.
func failingAuthorizer(down *atomic.Bool) Authorizer {
	return func(r *http.Request) (*Access, error) {
		if down.Load() {
			return nil, errors.New("session database unreachable")
		}
		return &Access{Subscribe: []Match{{Pattern: "*"}}}, nil
	}
}

func newInternalHub(t *testing.T, opts ...Option) *Hub {
	t.Helper()
	h, err := New("https://example.com/.well-known/mercure", append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	return h
}

// The negotiation: only a client that ranks text/event-stream above
// both problem types gets the stream; no Accept, */* (curl) and the Go
// client's header get the status.
func TestRetryLater_Negotiation(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	h := newInternalHub(t, WithAuthorizer(failingAuthorizer(&down), time.Minute))
	for _, tc := range []struct {
		accept   []string // "-": none
		deferred bool
	}{
		{[]string{"-"}, false},
		{[]string{""}, false},
		{[]string{"*/*"}, false},
		{[]string{"text/event-stream"}, true}, // EventSource
		{[]string{"TEXT/Event-Stream"}, true},
		{[]string{"text/event-stream, application/problem+json"}, false}, // the Go client
		{[]string{"text/event-stream, application/problem+json;q=0.9"}, true},
		{[]string{"text/event-stream;q=0.5, application/json"}, false},
		{[]string{"application/json;q=0.5, text/event-stream;q=0.8"}, true},
		{[]string{"text/event-stream, application/*"}, false},
		{[]string{"text/event-stream, */*;q=0.1"}, true},
		{[]string{"text/event-stream, */*"}, false},
		{[]string{"text/*"}, true},
		{[]string{"text/html, text/event-stream;q=0.9"}, true},
		{[]string{"application/problem+json"}, false},
		{[]string{"text/event-stream;q=0"}, false},
		{[]string{"text/event-stream;q=0.001"}, true},
		{[]string{"text/event-stream;q=abc"}, false}, // malformed: ignored
		{[]string{"text/event-stream; charset=utf-8"}, true},
		{[]string{"text/event-stream", "application/problem+json"}, false},                       // two fields
		{[]string{"text/event-stream;q=1, text/*;q=0"}, true},                                    // the most specific range wins
		{[]string{"*/*;q=0.5, application/problem+json;q=0.4, text/event-stream;q=0.45"}, false}, // application/json takes */*'s 0.5
		{[]string{"*/*;q=0.4, application/problem+json;q=0.4, text/event-stream;q=0.45"}, true},
	} {
		r := httptest.NewRequest(http.MethodGet, h.Path()+"?match=urn%3Aa", nil)
		for _, a := range tc.accept {
			if a != "-" {
				r.Header.Add("Accept", a)
			}
		}
		before := h.Metrics().SubscribesDeferred
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		t.Run(strings.Join(tc.accept, "|"), func(t *testing.T) {
			wantRefusal(t, w, tc.deferred, http.StatusServiceUnavailable, "authorization is unavailable")
			want := before
			if tc.deferred {
				want++
			}
			if got := h.Metrics().SubscribesDeferred; got != want {
				t.Fatalf("SubscribesDeferred %d, want %d", got, want)
			}
		})
	}
}

// accepts are the two negotiations each temporary refusal is tried with.
var accepts = []struct {
	name     string
	accept   string
	deferred bool
}{{"EventSource", "text/event-stream", true}, {"script", "-", false}, {"curl", "*/*", false}}

// Refusals that retrying cannot cure are answered alike to every client:
// an EventSource must stop on them.
func TestRetryLater_PermanentRefusalsUnchanged(t *testing.T) {
	h := newInternalHub(t, WithAuthorizer(func(*http.Request) (*Access, error) {
		return &Access{Subscribe: []Match{{Pattern: "https://example.com/(", Type: MatchURLPattern}}}, nil // the application's bug: 500
	}, time.Minute))
	for _, a := range accepts {
		if w := subscribeWith(h, a.accept); w.Code != http.StatusInternalServerError {
			t.Fatalf("%s: an unusable Access: %d, want 500", a.name, w.Code)
		}
		r := httptest.NewRequest(http.MethodGet, h.Path(), nil) // no match: 400 (SUB-9)
		r.Header.Set("Accept", "text/event-stream")
		w := httptest.NewRecorder()
		newInternalHub(t, WithAnonymousSubscribers()).ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest {
			t.Fatalf("no match: %d, want 400", w.Code)
		}
	}
	// No session and no token where one is required: 401, an
	// EventSource included.
	tokens := newInternalHub(t, WithAuthorizer(func(*http.Request) (*Access, error) { return nil, nil }, time.Minute))
	for _, a := range accepts {
		if w := subscribeWith(tokens, a.accept); w.Code != http.StatusUnauthorized {
			t.Fatalf("%s: no session: %d, want 401", a.name, w.Code)
		}
	}
	if n := h.Metrics().SubscribesDeferred + tokens.Metrics().SubscribesDeferred; n != 0 {
		t.Fatalf("SubscribesDeferred %d, want 0", n)
	}
}

// The application's session lookup fails (issue: a short database outage
// closed the browser's EventSource for good): 503, or a stream that
// retries; once it works again, the same request opens a stream.
func TestRetryLater_AuthorizerDown(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	h := newInternalHub(t, WithAuthorizer(failingAuthorizer(&down), time.Minute))
	for _, a := range accepts {
		t.Run(a.name, func(t *testing.T) {
			wantRefusal(t, subscribeWith(h, a.accept), a.deferred, http.StatusServiceUnavailable, "authorization is unavailable")
		})
	}
}

// replayFailStore is a store whose history cannot be read while err is
// set, as when its database is unreachable.
type replayFailStore struct {
	*memring.Ring
	mu  sync.Mutex
	err error
}

func (s *replayFailStore) Replay(ctx context.Context, id string) (store.Backlog, error) {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return store.Backlog{}, err
	}
	return s.Ring.Replay(ctx, id)
}

// History cannot be read for a stream that resumes: 503, or a stream
// that retries and leaves the client's cursor as it was.
func TestRetryLater_HistoryUnavailable(t *testing.T) {
	st := &replayFailStore{Ring: newRing(10), err: errors.New("connection refused")}
	h := newInternalHub(t, WithStore(st), WithAnonymousSubscribers())
	for _, a := range accepts {
		t.Run(a.name, func(t *testing.T) {
			w := subscribeWith(h, a.accept, "Last-Event-ID", store.Earliest)
			wantRefusal(t, w, a.deferred, http.StatusServiceUnavailable, "history is unavailable")
		})
	}
	if m := h.Metrics(); m.SubscribesDeferred != 1 || m.StoreErrors != uint64(len(accepts)) {
		t.Fatalf("SubscribesDeferred %d, StoreErrors %d; want 1, %d", m.SubscribesDeferred, m.StoreErrors, len(accepts))
	}
}

// Every replay slot is taken (Limits.MaxReplays) past replayWait: 503, or
// a stream that retries. In a synctest bubble: the waits pass on its
// clock.
func TestRetryLater_ReplaysExhausted(t *testing.T) {
	for _, a := range accepts {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &heldReplayStore{Ring: newRing(10)}
				h := newInternalHub(t, WithStore(st), WithAnonymousSubscribers(), WithLimits(Limits{MaxReplays: 1}))
				ctx, cancel := context.WithCancel(context.Background())
				held := make(chan struct{})
				go func() {
					defer close(held)
					r := httptest.NewRequestWithContext(ctx, http.MethodGet, h.Path()+"?match=x", nil)
					r.Header.Set("Last-Event-ID", store.Earliest)
					h.ServeHTTP(httptest.NewRecorder(), r)
				}()
				defer func() { cancel(); <-held }()
				synctest.Wait()
				if n := st.replaying.Load(); n != 1 {
					t.Fatalf("%d replays hold the slot, want 1", n)
				}
				w := subscribeWith(h, a.accept, "Last-Event-ID", store.Earliest)
				wantRefusal(t, w, a.deferred, http.StatusServiceUnavailable, "too many replays in progress")
			})
		})
	}
}

// A connection budget is spent (Limits.MaxConnectionsPerClient): 429,
// or a stream that retries after about the same 10 s.
func TestRetryLater_Budget(t *testing.T) {
	h := newInternalHub(t, WithAnonymousSubscribers(), WithLimits(Limits{MaxConnectionsPerClient: 1}))
	ctx, cancel := context.WithCancel(context.Background())
	open := make(chan struct{})
	go func() {
		defer close(open)
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, h.Path()+"?match=x", nil)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	defer func() { cancel(); <-open }()
	testwait.For(t, "the client's one stream", func() bool { return h.Metrics().Streams == 1 })
	for _, a := range accepts {
		t.Run(a.name, func(t *testing.T) {
			wantRefusal(t, subscribeWith(h, a.accept), a.deferred, http.StatusTooManyRequests, "too many connections from this client")
		})
	}
}

// A hub that has shut down: 503, or a stream that retries (to another
// instance, or to this one restarted). During a drain (Limits.Drain) every
// client gets the drain's retry, which TestDrain covers.
func TestRetryLater_ShutDown(t *testing.T) {
	h := newInternalHub(t, WithAnonymousSubscribers())
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, a := range accepts {
		t.Run(a.name, func(t *testing.T) {
			wantRefusal(t, subscribeWith(h, a.accept), a.deferred, http.StatusServiceUnavailable, "the hub is shutting down")
		})
	}
	if n := h.Metrics().SubscribesDeferred; n != 1 {
		t.Fatalf("SubscribesDeferred %d, want 1", n)
	}
}

// The retry field's delay is d ± d/2, at least a millisecond, and spread.
func TestRetryLater_Jitter(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		w := httptest.NewRecorder()
		retryStream(w, "503 a\nb", 2*time.Second)
		m := retryBody.FindStringSubmatch(w.Body.String())
		if m == nil || m[2] != "a b" {
			t.Fatalf("body %q", w.Body.String())
		}
		ms, _ := strconv.Atoi(m[3])
		if ms < 1000 || ms >= 3000 {
			t.Fatalf("retry %d ms, want 1000 to 2999", ms)
		}
		seen[m[3]] = true
	}
	if len(seen) < 50 {
		t.Fatalf("%d distinct delays in 200, want them spread", len(seen))
	}
	w := httptest.NewRecorder()
	retryStream(w, "", 0)
	if w.Body.String() != "retry: 1\n" {
		t.Fatalf("a zero delay: %q, want a millisecond", w.Body.String())
	}
}

// The first deferred refusal is logged at Warn (a budget too small shows
// at once), the next ones at Debug (no client floods the log).
func TestRetryLater_LoggedOnceAtWarn(t *testing.T) {
	var buf syncBuffer
	h := newInternalHub(t, WithAnonymousSubscribers(), WithLimits(Limits{MaxConnectionsPerClient: 1}),
		WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ctx, cancel := context.WithCancel(context.Background())
	open := make(chan struct{})
	go func() {
		defer close(open)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, h.Path()+"?match=x", nil))
	}()
	defer func() { cancel(); <-open }()
	testwait.For(t, "the client's one stream", func() bool { return h.Metrics().Streams == 1 })
	for range 3 {
		wantRefusal(t, subscribeWith(h, "text/event-stream"), true, http.StatusTooManyRequests, "too many connections from this client")
	}
	log := buf.String()
	const msg = `msg="mercure: a subscribe refused for now`
	if w, d := strings.Count(log, "level=WARN "+msg), strings.Count(log, "level=DEBUG "+msg); w != 1 || d != 2 {
		t.Fatalf("logged %d times at Warn and %d at Debug, want 1 and 2:\n%s", w, d, log)
	}
}

// syncBuffer is a bytes.Buffer that a logger and a test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A page of another origin (WithCORS) reads the stream that tells it to
// retry: without the CORS headers, its EventSource would fail for good
// all the same.
func TestRetryLater_CrossOrigin(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	h := newInternalHub(t, WithAuthorizer(failingAuthorizer(&down), time.Minute), WithCORS("https://app.example"))
	w := subscribeWith(h, "text/event-stream", "Origin", "https://app.example", "Sec-Fetch-Site", "cross-site")
	wantRefusal(t, w, true, http.StatusServiceUnavailable, "authorization is unavailable")
	if got := w.Header().Get("Access-Control-Allow-Origin"); got != "https://app.example" {
		t.Fatalf("Access-Control-Allow-Origin %q, want the page's origin", got)
	}
}
