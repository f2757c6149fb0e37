package promhub_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/promhub"
	"github.com/mercurekit/mercure/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	hubURL = "https://example.com/.well-known/mercure"
	issuer = "https://app.example.com"
	topic  = "https://example.com/books/1"
)

// signer returns a signer and the key set that verifies its tokens.
func signer(t *testing.T) (*mercure.Signer, jwk.Set) {
	t.Helper()
	secret := make([]byte, 32)
	rand.Read(secret)
	key, err := jwk.Import(secret)
	if err != nil {
		t.Fatal(err)
	}
	_ = key.Set(jwk.KeyIDKey, "k1")
	set := jwk.NewSet()
	if err := set.AddKey(key); err != nil {
		t.Fatal(err)
	}
	s, err := mercure.NewSigner(key, issuer, hubURL)
	if err != nil {
		t.Fatal(err)
	}
	return s, set
}

func token(t *testing.T, s *mercure.Signer, g mercure.Grant) string {
	t.Helper()
	tok, err := s.Token(g)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// feedStore is a memory store whose live feed the test reports down or up.
type feedStore struct {
	*memstore.Store
	mu sync.Mutex
	l  store.Listener
}

func (f *feedStore) Listen(l store.Listener) func() {
	f.mu.Lock()
	f.l = l
	f.mu.Unlock()
	return f.Store.Listen(l)
}

func (f *feedStore) status(err error) {
	f.mu.Lock()
	l := f.l
	f.mu.Unlock()
	l.Status(err)
}

// stallWriter is a ResponseWriter whose writes of events block until
// released: a subscriber that stops reading, without TCP buffers.
type stallWriter struct {
	hdr      http.Header
	release  chan struct{}
	stalled  chan struct{}
	stallOne sync.Once
	headed   chan struct{} // closed with the headers: the stream receives updates
}

func (w *stallWriter) Header() http.Header { return w.hdr }
func (w *stallWriter) WriteHeader(int)     { close(w.headed) }
func (w *stallWriter) Flush()              {}
func (w *stallWriter) Write(b []byte) (int, error) {
	if strings.Contains(string(b), "data:") {
		w.stallOne.Do(func() { close(w.stalled) })
		<-w.release
	}
	return len(b), nil
}

type env struct {
	t     *testing.T
	hub   *mercure.Hub
	srv   *httptest.Server
	reg   *prometheus.Registry
	store *feedStore
}

func (e *env) endpoint() string { return e.srv.URL + e.hub.Path() }

func (e *env) post(auth, body string) int {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.endpoint(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// sub is an SSE subscription over HTTP.
type sub struct {
	res    *http.Response
	cancel context.CancelFunc
	data   chan string
	done   chan struct{}
}

func (e *env) subscribe(query string, header ...string) *sub {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.endpoint()+"?"+query, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		res.Body.Close()
		e.t.Fatalf("subscribe: %d", res.StatusCode)
	}
	s := &sub{res: res, cancel: cancel, data: make(chan string, 100), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				s.data <- strings.TrimPrefix(d, " ")
			}
		}
	}()
	e.t.Cleanup(s.close)
	return s
}

func (s *sub) next(t *testing.T) string {
	t.Helper()
	select {
	case d := <-s.data:
		return d
	case <-s.done:
		select {
		case d := <-s.data:
			return d
		default:
		}
		t.Fatal("the stream ended before the next event")
	case <-time.After(storetest.Deadline):
		t.Fatalf("no event within %v", storetest.Deadline)
	}
	return ""
}

// ended waits until the hub ends the stream.
func (s *sub) ended(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(storetest.Deadline):
		t.Fatal("the stream did not end")
	}
}

func (s *sub) close() {
	s.cancel()
	s.res.Body.Close()
	<-s.done
}

func newEnv(t *testing.T, opts ...mercure.Option) *env {
	t.Helper()
	ms, err := memstore.New(memstore.WithMaxEvents(100))
	if err != nil {
		t.Fatal(err)
	}
	st := &feedStore{Store: ms}
	h, err := mercure.New(hubURL, append([]mercure.Option{mercure.WithStore(st), mercure.WithLogger(nil)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(h.Path(), h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		srv.Close()
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promhub.NewCollector(h))
	return &env{t: t, hub: h, srv: srv, reg: reg, store: st}
}

// value is the value of the series name{labels...} gathered from the
// registry: a counter's or gauge's value, a histogram's count.
func (e *env) value(name string, labels ...string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	e.t.Fatalf("no series %s%v", name, labels)
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func (e *env) want(want float64, name string, labels ...string) {
	e.t.Helper()
	if got := e.value(name, labels...); got != want {
		e.t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// eventually waits until name{labels} is want.
func (e *env) eventually(want float64, name string, labels ...string) {
	e.t.Helper()
	if !storetest.Within(storetest.Deadline, func() bool { return e.value(name, labels...) == want }) {
		e.t.Fatalf("%s%v = %v, want %v", name, labels, e.value(name, labels...), want)
	}
}

// A scripted run through publishes, refusals, subscriptions, a client
// that leaves, one that falls behind, a token that expires, a feed
// outage and shutdown; each series then has the value the script implies.
func TestCollector_ScriptedSequence(t *testing.T) {
	signer, set := signer(t)
	other, _ := signer2(t)
	e := newEnv(t,
		mercure.WithIssuer(mercure.Issuer{ID: issuer, PublisherKeys: set, SubscriberKeys: set}),
		mercure.WithAnonymousSubscribers(),
		mercure.WithSubscriptions(),
		// Queues of two events: a reader keeps up, though the hub may
		// count an event it has just written to it until its writer's
		// bookkeeping catches up; the stalled one below falls behind.
		mercure.WithLimits(mercure.Limits{QueueEvents: 2, MaxBodyBytes: 100}),
		// The stalled stream below falls behind once its queue is full and
		// its write has been stuck for a quarter of this (its writer has
		// no deadlines to time out).
		mercure.WithLimits(mercure.Limits{WriteTimeout: 2 * time.Second}),
	)
	pub := "Bearer " + token(t, signer, mercure.Grant{Subject: "p", Publish: []mercure.Match{{Pattern: "*"}}})
	noGrant := "Bearer " + token(t, signer, mercure.Grant{Subject: "p", Publish: []mercure.Match{{Pattern: "https://example.com/other"}}})
	foreign := "Bearer " + token(t, other, mercure.Grant{Subject: "p", Publish: []mercure.Match{{Pattern: "*"}}})
	form := "topic=" + url.QueryEscape(topic) + "&data="

	e.want(0, "mercure_streams")
	e.want(1, "mercure_store_feed_up")

	// A subscriber that reads, and one that will leave.
	reader := e.subscribe("match=" + url.QueryEscape(topic))
	leaver := e.subscribe("match=" + url.QueryEscape(topic))
	e.want(2, "mercure_streams")
	e.want(2, "mercure_streams_opened_total")
	e.want(2, "mercure_subscriptions")

	// Publications: two over HTTP, one from Go, each read before the next.
	for _, data := range []string{"a", "b", "c"} {
		if data == "c" {
			if _, err := e.hub.Publish(context.Background(), mercure.Update{Topics: []string{topic}, Data: data}); err != nil {
				t.Fatal(err)
			}
		} else if s := e.post(pub, form+data); s != 200 {
			t.Fatalf("publish: %d", s)
		}
		if got := reader.next(t); got != data {
			t.Fatalf("event %q, want %q", got, data)
		}
		if got := leaver.next(t); got != data {
			t.Fatalf("event %q, want %q", got, data)
		}
	}
	e.want(2, "mercure_updates_published_total", "source", "http")
	e.want(1, "mercure_updates_published_total", "source", "go")
	e.want(3, "mercure_publish_duration_seconds")
	// And the two subscription events (WithSubscriptions).
	e.eventually(5, "mercure_dispatch_duration_seconds")
	e.want(6, "mercure_deliveries_total")
	if b := e.value("mercure_delivered_bytes_total"); b < float64(6*len("data:a\n\n")) {
		t.Errorf("delivered bytes %v", b)
	}
	// Each stream's first write is sampled; then one in 64.
	e.eventually(2, "mercure_delivery_delay_seconds")

	// Refusals.
	for _, c := range []struct {
		auth, body string
		status     int
	}{
		{"", form + "x", 401},                       // no token: missing
		{"Basic eDp5", form + "x", 400},             // malformed header
		{"Bearer not-a-jws", form + "x", 401},       // malformed token
		{foreign, form + "x", 401},                  // unknown key: signature
		{noGrant, form + "x", 403},                  // grants
		{pub, "data=x", 400},                        // no topic
		{pub, form + strings.Repeat("x", 200), 413}, // too large
	} {
		if s := e.post(c.auth, c.body); s != c.status {
			t.Errorf("POST %q %.20q: %d, want %d", c.auth, c.body, s, c.status)
		}
	}
	if _, err := e.hub.Publish(context.Background(), mercure.Update{Data: "no topic"}); err == nil {
		t.Fatal("Publish without a topic succeeded")
	}
	e.want(3, "mercure_updates_refused_total", "reason", "400")
	e.want(3, "mercure_updates_refused_total", "reason", "401")
	e.want(1, "mercure_updates_refused_total", "reason", "403")
	e.want(1, "mercure_updates_refused_total", "reason", "413")
	e.want(0, "mercure_updates_refused_total", "reason", "503")
	e.want(1, "mercure_token_failures_total", "reason", "missing")
	e.want(2, "mercure_token_failures_total", "reason", "malformed")
	e.want(1, "mercure_token_failures_total", "reason", "signature")
	e.want(1, "mercure_token_failures_total", "reason", "grants")
	e.want(0, "mercure_token_failures_total", "reason", "expired")
	for _, r := range []string{"algorithm", "type", "legacy_claim", "not_yet_valid", "audience", "issuer", "other"} {
		e.want(0, "mercure_token_failures_total", "reason", r)
	}

	// The client that leaves.
	leaver.close()
	e.eventually(1, "mercure_streams_closed_total", "reason", "client_gone")
	// The end is counted first (before the client can see it); the slot
	// is freed after the stream's clean-up, on a goroutine of its own for
	// a detached stream.
	e.eventually(1, "mercure_streams")

	// A replay from the start.
	replayer := e.subscribe("match="+url.QueryEscape(topic), "Last-Event-ID", store.Earliest)
	for _, want := range []string{"a", "b", "c"} {
		if got := replayer.next(t); got != want {
			t.Fatalf("replayed %q, want %q", got, want)
		}
	}
	e.want(1, "mercure_replays_total")
	e.want(3, "mercure_replayed_events_total")
	replayer.close()

	// A subscriber that stops reading falls behind and is cut.
	w := &stallWriter{hdr: http.Header{}, release: make(chan struct{}), stalled: make(chan struct{}), headed: make(chan struct{})}
	const stallTopic = "urn:stall" // the reader does not get its events
	req := httptest.NewRequest(http.MethodGet, hubURL+"?match="+url.QueryEscape(stallTopic), nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		e.hub.ServeHTTP(w, req)
	}()
	// Not as soon as mercure_streams says 2: a stream counts a moment
	// before it receives updates (see mercure.Stats).
	select {
	case <-w.headed:
	case <-time.After(storetest.Deadline):
		t.Fatal("the stalled stream got no headers")
	}
	e.eventually(2, "mercure_streams") // and the replayer's released
	e.hub.Publish(context.Background(), mercure.Update{Topics: []string{stallTopic}, Data: "d"})
	select {
	case <-w.stalled:
	case <-served:
		t.Fatal("the stalled stream ended before its first event")
	case <-time.After(storetest.Deadline):
		t.Fatal("the stalled stream got no event")
	}
	for start := time.Now(); e.hub.Metrics().Overflows == 0; {
		if time.Since(start) > storetest.Deadline {
			t.Fatal("no overflow")
		}
		e.hub.Publish(context.Background(), mercure.Update{Topics: []string{stallTopic}, Data: "e"})
		time.Sleep(time.Millisecond)
	}
	close(w.release)
	select {
	case <-served:
	case <-time.After(storetest.Deadline):
		t.Fatal("the stream that fell behind was not ended")
	}
	e.want(1, "mercure_streams_closed_total", "reason", "queue_overflow")

	// A subscriber whose token expires.
	subTok := token(t, signer, mercure.Grant{Subject: "s", Subscribe: []mercure.Match{{Pattern: "*"}}, TTL: 1500 * time.Millisecond})
	expiring := e.subscribe("match="+url.QueryEscape(topic), "Authorization", "Bearer "+subTok)
	expiring.ended(t)
	e.eventually(1, "mercure_streams_closed_total", "reason", "token_expired")

	// The store's feed fails, then recovers.
	e.store.status(errors.New("connection refused"))
	e.want(0, "mercure_store_feed_up")
	e.store.status(nil)
	e.want(1, "mercure_store_feed_up")

	// Shutdown ends the reader's stream.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.hub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	e.want(1, "mercure_streams_closed_total", "reason", "shutdown")
	e.want(0, "mercure_streams")
	e.want(5, "mercure_streams_opened_total")
	e.want(0, "mercure_subscriptions")
	for _, r := range []string{"lifetime", "write_error", "history_gap", "replay_error"} {
		e.want(0, "mercure_streams_closed_total", "reason", r)
	}
	e.want(0, "mercure_store_errors_total")
	problems, err := testutil.GatherAndLint(e.reg)
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
}

func signer2(t *testing.T) (*mercure.Signer, jwk.Set) { return signer(t) }

// A stream that reaches the maximum lifetime ends for that reason.
func TestCollector_Lifetime(t *testing.T) {
	e := newEnv(t, mercure.WithLimits(mercure.Limits{StreamLifetime: 100 * time.Millisecond}))
	s := e.subscribe("match=" + url.QueryEscape(topic))
	s.ended(t)
	e.eventually(1, "mercure_streams_closed_total", "reason", "lifetime")
}

// Handler serves the series in the text format.
func TestHandler(t *testing.T) {
	e := newEnv(t)
	rec := httptest.NewRecorder()
	promhub.Handler(e.hub).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	for _, name := range []string{"mercure_streams ", "mercure_store_feed_up 1", "mercure_dispatch_duration_seconds_bucket", `mercure_streams_closed_total{reason="shutdown"} 0`} {
		if !strings.Contains(rec.Body.String(), name) {
			t.Errorf("no %q in\n%s", name, rec.Body.String())
		}
	}
	if n := testutil.CollectAndCount(promhub.NewCollector(e.hub)); n < 18 {
		t.Errorf("%d series", n)
	}
}

// Streams written by their goroutines end for the same reasons as
// detached ones, the default.
func TestCollector_GoroutineStreamsCloseReasons(t *testing.T) {
	signer, set := signer(t)
	e := newEnv(t, mercure.WithGoroutineStreams(), mercure.WithAnonymousSubscribers(),
		mercure.WithIssuer(mercure.Issuer{ID: issuer, SubscriberKeys: set}))
	q := "match=" + url.QueryEscape(topic)
	leaver := e.subscribe(q)
	reader := e.subscribe(q)
	tok := token(t, signer, mercure.Grant{Subject: "s", Subscribe: []mercure.Match{{Pattern: "*"}}, TTL: 1500 * time.Millisecond})
	expiring := e.subscribe(q, "Authorization", "Bearer "+tok)
	if _, err := e.hub.Publish(context.Background(), mercure.Update{Topics: []string{topic}, Data: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*sub{leaver, reader, expiring} {
		if got := s.next(t); got != "a" {
			t.Fatalf("event %q", got)
		}
	}
	e.want(3, "mercure_deliveries_total")
	e.eventually(3, "mercure_delivery_delay_seconds")
	leaver.close()
	e.eventually(1, "mercure_streams_closed_total", "reason", "client_gone")
	expiring.ended(t)
	e.eventually(1, "mercure_streams_closed_total", "reason", "token_expired")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.hub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	e.want(1, "mercure_streams_closed_total", "reason", "shutdown")
	e.want(3, "mercure_streams_opened_total")
	e.want(0, "mercure_streams")
}

// A subscribe refused for now (429 here: the client's one connection is
// taken) counts in mercure_subscribes_deferred_total when the client is an
// EventSource, which gets a stream that retries, and not when it reads
// the status.
func TestCollector_SubscribesDeferred(t *testing.T) {
	e := newEnv(t, mercure.WithAnonymousSubscribers(), mercure.WithLimits(mercure.Limits{MaxConnectionsPerClient: 1}))
	q := "match=" + url.QueryEscape(topic)
	e.subscribe(q)
	try := func(accept string) int {
		req, _ := http.NewRequest(http.MethodGet, e.endpoint()+"?"+q, nil)
		req.Header.Set("Accept", accept)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if s := try("*/*"); s != http.StatusTooManyRequests {
		t.Fatalf("a script: %d, want 429", s)
	}
	e.want(0, "mercure_subscribes_deferred_total")
	if s := try("text/event-stream"); s != http.StatusOK {
		t.Fatalf("an EventSource: %d, want 200 (a stream that retries)", s)
	}
	if s := try("text/event-stream"); s != http.StatusOK {
		t.Fatalf("an EventSource: %d, want 200 (a stream that retries)", s)
	}
	e.want(2, "mercure_subscribes_deferred_total")
	if got := e.hub.Metrics().SubscribesDeferred; got != 2 {
		t.Fatalf("Metrics().SubscribesDeferred = %d, want 2", got)
	}
}
