package mercure_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// The Authorizer (WithAuthorizer) is an embedding extension, not a rule
// of the spec: its tests check that an Access is applied exactly as a
// token's grants are (AUTH-30, AUTH-34, AUTH-35, AUTH-41, ACT-10, ACT-13,
// SEC-4), and the life of the streams it authorizes.

// appSessions is an application's session store: the Authorizer reads
// the session cookie and looks its user's access up.
type appSessions struct {
	mu     sync.Mutex
	access map[string]*mercure.Access // by session id
	err    error                      // the store is down
	block  bool                       // calls wait for their context to end
	calls  atomic.Int64
}

const sessionCookieName = "app_session"

func newAppSessions() *appSessions {
	return &appSessions{access: make(map[string]*mercure.Access)}
}

func (s *appSessions) set(id string, a *mercure.Access) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a == nil {
		delete(s.access, id)
		return
	}
	s.access[id] = a
}

func (s *appSessions) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *appSessions) authorize(r *http.Request) (*mercure.Access, error) {
	s.calls.Add(1)
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	if block {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	c, cerr := r.Cookie(sessionCookieName)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if cerr != nil {
		return nil, nil
	}
	a := s.access[c.Value]
	if a == nil {
		return nil, nil
	}
	cp := *a
	return &cp, nil
}

// cookie is the header pair of session id.
func cookie(id string) []string { return []string{"Cookie", sessionCookieName + "=" + id} }

const (
	topicA = "https://example.com/a"
	topicB = "https://example.com/b"
)

// startSessionHub starts a hub authorizing with sessions, re-checked
// every 50ms, with insecure publishing unless opts say otherwise.
func startSessionHub(t *testing.T, sessions *appSessions, opts ...mercure.Option) *testHub {
	t.Helper()
	return startHub(t, nil, append([]mercure.Option{mercure.WithAuthorizer(sessions.authorize, 50*time.Millisecond)}, opts...)...)
}

// TestAuthorizer_PrivateUpdates: a session's subscribe grants open the
// private updates on its topics, and no others (AUTH-35); anonymous
// clients are refused unless allowed, and then get public updates only
// (AUTH-2).
func TestAuthorizer_PrivateUpdates(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	sessions.set("alice", &mercure.Access{Subject: "alice", Subscribe: []mercure.Match{{Pattern: topicA}}})
	th := startSessionHub(t, sessions, mercure.WithInsecurePublishing())

	if status, _, _ := th.request(http.MethodGet, "match="+url.QueryEscape(topicA), ""); status != http.StatusUnauthorized {
		t.Fatalf("no session: status %d, want 401", status)
	}
	if status, _, _ := th.request(http.MethodGet, "match="+url.QueryEscape(topicA), "", cookie("nobody")...); status != http.StatusUnauthorized {
		t.Fatalf("unknown session: status %d, want 401", status)
	}

	s := th.subscribe(form("match", topicA, "match", topicB), cookie("alice")...)
	goPublish(t, th, mercure.Update{Topics: []string{topicB}, Data: "private b", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "private a", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{topicB}, Data: "public b"})
	expectData(t, s, "private a")
	expectData(t, s, "public b")

	// A private update on a hub that authorizes sessions only has readers.
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{topicA}, Private: true}); err != nil {
		t.Fatalf("private update with an Authorizer: %v", err)
	}
}

func TestAuthorizer_AnonymousAllowed(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: "*"}}})
	th := startSessionHub(t, sessions, mercure.WithInsecurePublishing(), mercure.WithAnonymousSubscribers())
	anon := th.subscribe("match=" + url.QueryEscape(topicA))
	alice := th.subscribe("match="+url.QueryEscape(topicA), cookie("alice")...)
	goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "private", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "public"})
	expectData(t, anon, "public")
	expectData(t, alice, "private")
	expectData(t, alice, "public")
}

// TestAuthorizer_TokenDecides: a request presenting a token is authorized
// by the token alone, whatever its session; an invalid token is refused,
// never passed to the Authorizer (AUTH-14).
func TestAuthorizer_TokenDecides(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
	th := startSessionHub(t, sessions, withAuthIssuer(t), mercure.WithInsecurePublishing())
	q := form("match", topicA, "match", topicB)

	tok := subToken(t, detail("subscribe", exactTopic(topicB)))
	both := th.subscribe(q, "Authorization", "Bearer "+tok, "Cookie", sessionCookieName+"=alice")
	session := th.subscribe(q, cookie("alice")...)
	if status, _, _ := th.request(http.MethodGet, q, "", "Authorization", "Bearer "+tok+"x", "Cookie", sessionCookieName+"=alice"); status != http.StatusUnauthorized {
		t.Fatalf("invalid token beside a session: status %d, want 401", status)
	}
	goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "a", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{topicB}, Data: "b", Private: true})
	expectData(t, both, "b")
	expectData(t, session, "a")
}

// TestAuthorizer_InvalidTokenNotPassedOn counts the Authorizer's calls on
// a hub that never re-checks within the test: an invalid token never
// reaches it.
func TestAuthorizer_InvalidTokenNotPassedOn(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
	th := startHub(t, nil, withAuthIssuer(t), mercure.WithAuthorizer(sessions.authorize, time.Hour))
	q := "match=" + url.QueryEscape(topicA)
	if status, _, _ := th.request(http.MethodGet, q, "", "Authorization", "Bearer nope", "Cookie", sessionCookieName+"=alice"); status != http.StatusUnauthorized {
		t.Fatalf("invalid token: status %d, want 401", status)
	}
	if status, _, _ := th.request(http.MethodGet, q, "", "Authorization", "Basic eDp5"); status != http.StatusBadRequest {
		t.Fatalf("malformed Authorization: status %d, want 400", status)
	}
	if n := sessions.calls.Load(); n != 0 {
		t.Fatalf("the Authorizer was called %d times for requests with a token", n)
	}
	s := th.subscribe(q, cookie("alice")...)
	goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "a", Private: true})
	expectData(t, s, "a")
	if n := sessions.calls.Load(); n != 1 {
		t.Fatalf("the Authorizer was called %d times, want 1", n)
	}
}

// TestAuthorizer_Publish: a session's publish grants are needed on every
// topic (AUTH-34); a session is ambient like a cookie, so a publish it
// authorizes must come from the hub's origin or a CORS one (SEC-4).
func TestAuthorizer_Publish(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	sessions.set("alice", &mercure.Access{Publish: []mercure.Match{{Pattern: "https://example.com/a{/*}?", Type: mercure.MatchURLPattern}}})
	sessions.set("bob", &mercure.Access{Subscribe: []mercure.Match{{Pattern: "*"}}})
	th := startSessionHub(t, sessions, mercure.WithAnonymousSubscribers(), mercure.WithCORS("https://app.example.com"))
	watch := th.subscribe("match=*", cookie("bob")...)

	post := func(body, origin string, header ...string) int {
		t.Helper()
		if origin != "" {
			header = append(header, "Origin", origin)
		}
		status, _, _ := th.request(http.MethodPost, "", body, header...)
		return status
	}
	const same, cors = "https://example.com", "https://app.example.com"
	alice := cookie("alice")
	for _, c := range []struct {
		name   string
		body   string
		origin string
		header []string
		want   int
	}{
		{"no session", form("topic", topicA, "data", "x"), same, nil, http.StatusUnauthorized},
		{"no publish grant", form("topic", topicA, "data", "x"), same, cookie("bob"), http.StatusForbidden},
		{"not every topic", form("topic", topicA, "topic", topicB, "data", "x"), same, alice, http.StatusForbidden},
		{"cross-origin", form("topic", topicA, "data", "x"), "https://evil.example", alice, http.StatusForbidden},
		{"no origin", form("topic", topicA, "data", "x"), "", alice, http.StatusForbidden},
		{"same origin", form("topic", topicA, "data", "same", "private", "on"), same, alice, http.StatusOK},
		{"CORS origin", form("topic", topicA+"/1", "data", "cors"), cors, alice, http.StatusOK},
	} {
		if got := post(c.body, c.origin, c.header...); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	expectData(t, watch, "same")
	expectData(t, watch, "cors")
}

// TestAuthorizer_SubscriptionsAPI: the API is authorized by a session's
// subscribe grants (ACT-13), and a subscription carries the session's
// payload (AUTH-41).
func TestAuthorizer_SubscriptionsAPI(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	const api = "/.well-known/mercure/subscriptions{/*}?"
	sessions.set("alice", &mercure.Access{
		Subscribe: []mercure.Match{{Pattern: topicA}, {Pattern: api, Type: mercure.MatchURLPattern}},
		Payload:   map[string]string{"user": "alice"},
	})
	sessions.set("bob", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
	th := startMountedHub(t, mercure.WithAuthorizer(sessions.authorize, 50*time.Millisecond), mercure.WithSubscriptions())

	get := func(header ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, th.srv.URL+"/.well-known/mercure/subscriptions", nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		status, body, _ := do(t, req)
		return status, body
	}
	if status, _ := get(); status != http.StatusUnauthorized {
		t.Fatalf("no session: status %d, want 401", status)
	}
	if status, _ := get(cookie("bob")...); status != http.StatusForbidden {
		t.Fatalf("no grant on the API: status %d, want 403", status)
	}

	watch := th.subscribe("match_urlpattern="+url.QueryEscape("/.well-known/mercure/subscriptions/:type/:match/:subscriber"), cookie("alice")...)
	doc := subscriptionDoc(t, watch.next(t)) // its own subscription
	if got, _ := json.Marshal(doc["payload"]); string(got) != `{"user":"alice"}` {
		t.Fatalf("payload %s, want the session's", got)
	}
	th.subscribe("match="+url.QueryEscape(topicA), cookie("bob")...)
	doc = subscriptionDoc(t, watch.next(t))
	if doc["match"] != topicA || doc["payload"] != nil {
		t.Fatalf("bob's subscription %v: want %s without payload", doc, topicA)
	}

	status, body := get(cookie("alice")...)
	if status != http.StatusOK {
		t.Fatalf("API: status %d: %s", status, body)
	}
	var list struct{ Subscriptions []mercure.Subscription }
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Subscriptions) != 2 {
		t.Fatalf("API: %s (%v), want 2 subscriptions", body, err)
	}
}

// TestAuthorizer_Replay: a resuming stream gets the private updates its
// session grants from history, as with a token (REC-5).
func TestAuthorizer_Replay(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
	th := startSessionHub(t, sessions, mercure.WithInsecurePublishing())
	first := th.mustPost(form("topic", topicB, "data", "start"))
	goPublish(t, th, mercure.Update{Topics: []string{topicB}, Data: "b", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "a", Private: true})
	s := th.subscribe(form("match", topicA, "match", topicB, "last_event_id", first), cookie("alice")...)
	expectData(t, s, "a")
}

// streamModes runs f with streams written by their goroutines and
// detached: both must honour the re-checks.
func streamModes(t *testing.T, f func(t *testing.T, opts ...mercure.Option)) {
	t.Run("goroutine", func(t *testing.T) { f(t, mercure.WithGoroutineStreams()) })
	t.Run("detached", func(t *testing.T) { f(t, mercure.WithDetachedStreams()) })
}

// streamModesParallel is streamModes with the two modes side by side and
// started at once (see testwait.AtOnce), for tests that spend their time
// waiting (a stall grace, a timeout).
func streamModesParallel(t *testing.T, f func(t *testing.T, opts ...mercure.Option)) {
	testwait.AtOnce(t, map[string]func(t *testing.T){
		"goroutine": func(t *testing.T) { f(t, mercure.WithGoroutineStreams()) },
		"detached":  func(t *testing.T) { f(t, mercure.WithDetachedStreams()) },
	})
}

// endsCleanly waits for the end of s, which must be clean: the hub ended it.
func endsCleanly(t *testing.T, s *subscription) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(testwait.Deadline):
		t.Fatal("the stream did not end")
	}
	if s.err != nil {
		t.Fatalf("the stream ended with %v, want a clean end", s.err)
	}
}

// TestAuthorizer_RevokedSessionEndsStream: a stream whose session ends is
// ended at a re-check, and its reconnection is refused.
func TestAuthorizer_RevokedSessionEndsStream(t *testing.T) {
	t.Parallel()
	streamModes(t, func(t *testing.T, opts ...mercure.Option) {
		sessions := newAppSessions()
		sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
		sessions.set("bob", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
		th := startSessionHub(t, sessions, append(opts, mercure.WithInsecurePublishing())...)
		q := "match=" + url.QueryEscape(topicA)
		alice := th.subscribe(q, cookie("alice")...)
		bob := th.subscribe(q, cookie("bob")...)
		goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "before", Private: true})
		expectData(t, alice, "before")
		expectData(t, bob, "before")

		sessions.set("alice", nil) // logged out
		endsCleanly(t, alice)
		testwait.For(t, "the revocation counted", func() bool { return th.Metrics().StreamsClosed[mercure.CloseRevoked] == 1 })
		if status, _, _ := th.request(http.MethodGet, q, "", cookie("alice")...); status != http.StatusUnauthorized {
			t.Fatalf("reconnection after logout: status %d, want 401", status)
		}
		// Bob's session is unchanged: his stream goes on, re-checked.
		calls := sessions.calls.Load()
		testwait.For(t, "more re-checks", func() bool { return sessions.calls.Load() >= calls+3 })
		goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "after", Private: true})
		expectData(t, bob, "after")
	})
}

// TestAuthorizer_ChangedGrantsEndStream: a stream whose subscribe grants
// or payload changed ends, so that the client reconnects with its new
// rights; it resumes with Last-Event-ID and misses nothing.
func TestAuthorizer_ChangedGrantsEndStream(t *testing.T) {
	t.Parallel()
	streamModes(t, func(t *testing.T, opts ...mercure.Option) {
		sessions := newAppSessions()
		sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
		th := startSessionHub(t, sessions, append(opts, mercure.WithInsecurePublishing())...)
		q := form("match", topicA, "match", topicB)
		s := th.subscribe(q, cookie("alice")...)
		goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "a1", Private: true})
		last := s.next(t)

		// The publish grants do not matter to a stream.
		sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}, Publish: []mercure.Match{{Pattern: topicB}}})
		calls := sessions.calls.Load()
		testwait.For(t, "re-checks", func() bool { return sessions.calls.Load() >= calls+3 })
		goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "a2", Private: true})
		last = s.next(t)

		sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}, {Pattern: topicB}}})
		goPublish(t, th, mercure.Update{Topics: []string{topicB}, Data: "b1", Private: true})
		endsCleanly(t, s)
		testwait.For(t, "the change counted", func() bool { return th.Metrics().StreamsClosed[mercure.CloseGrantsChanged] == 1 })
		s = th.subscribe(q, append(cookie("alice"), "Last-Event-ID", last.ID)...)
		expectData(t, s, "b1")

		// A new payload is a change too: it is in the subscription's event.
		sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}, {Pattern: topicB}}, Payload: map[string]int{"v": 2}})
		endsCleanly(t, s)
		testwait.For(t, "the change counted", func() bool { return th.Metrics().StreamsClosed[mercure.CloseGrantsChanged] == 2 })
	})
}

// TestAuthorizer_FailureKeepsStream: while the Authorizer fails, streams
// keep their rights, new requests without a token get 503, and the
// failure is logged once.
func TestAuthorizer_FailureKeepsStream(t *testing.T) {
	t.Parallel()
	streamModes(t, func(t *testing.T, opts ...mercure.Option) {
		sessions := newAppSessions()
		sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
		logs := &recordLog{}
		th := startSessionHub(t, sessions, append(opts, mercure.WithInsecurePublishing(), mercure.WithLogger(slog.New(logs)))...)
		q := "match=" + url.QueryEscape(topicA)
		s := th.subscribe(q, cookie("alice")...)

		sessions.fail(errors.New("session store down"))
		calls := sessions.calls.Load()
		testwait.For(t, "failing re-checks", func() bool { return sessions.calls.Load() >= calls+3 })
		goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "still there", Private: true})
		expectData(t, s, "still there")
		status, _, hdr := th.request(http.MethodGet, q, "", cookie("alice")...)
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Fatalf("new stream while the Authorizer fails: status %d, Retry-After %q; want 503 with Retry-After", status, hdr.Get("Retry-After"))
		}
		if n := logs.count(slog.LevelWarn, "the authorizer fails"); n != 1 {
			t.Fatalf("the failure was logged %d times at Warn, want once", n)
		}

		sessions.fail(nil)
		testwait.For(t, "the recovery logged", func() bool { return logs.count(slog.LevelInfo, "the authorizer works again") == 1 })
		goPublish(t, th, mercure.Update{Topics: []string{topicA}, Data: "recovered", Private: true})
		expectData(t, s, "recovered")
		if n := th.Metrics().StreamsClosed[mercure.CloseRevoked] + th.Metrics().StreamsClosed[mercure.CloseGrantsChanged]; n != 0 {
			t.Fatalf("%d streams ended by the failure", n)
		}
	})
}

// TestAuthorizer_InvalidAccess: an Access the hub cannot use is the
// application's bug: 500, and an error logged saying the access is invalid.
func TestAuthorizer_InvalidAccess(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	for id, a := range map[string]*mercure.Access{
		"pattern": {Subscribe: []mercure.Match{{Pattern: "https://example.com/(", Type: mercure.MatchURLPattern}}},
		"type":    {Subscribe: []mercure.Match{{Pattern: topicA, Type: "regexp"}}},
		"empty":   {Publish: []mercure.Match{{}}},
		"control": {Subscribe: []mercure.Match{{Pattern: "a\x00b"}}},
		"long":    {Subscribe: []mercure.Match{{Pattern: strings.Repeat("a", 1<<20)}}},
		"payload": {Subscribe: []mercure.Match{{Pattern: topicA}}, Payload: []int{1}},
	} {
		sessions.set(id, a)
	}
	logs := &recordLog{}
	th := startSessionHub(t, sessions, mercure.WithInsecurePublishing(), mercure.WithLogger(slog.New(logs)))
	for _, id := range []string{"pattern", "type", "empty", "control", "long", "payload"} {
		if status, _, _ := th.request(http.MethodGet, "match="+url.QueryEscape(topicA), "", cookie(id)...); status != http.StatusInternalServerError {
			t.Errorf("%s: status %d, want 500", id, status)
		}
		if n := logs.errorsSaying("mercure: invalid access"); n != 1 {
			t.Errorf("%s: %d errors logged saying the access is invalid, want 1", id, n)
		}
		logs.reset()
	}
}

// TestAuthorizer_ShutdownDuringRecheck: Shutdown ends a re-check waiting
// for an Authorizer that honours its context, and leaves no goroutine
// (TestMain checks).
func TestAuthorizer_ShutdownDuringRecheck(t *testing.T) {
	t.Parallel()
	streamModes(t, func(t *testing.T, opts ...mercure.Option) {
		sessions := newAppSessions()
		sessions.set("alice", &mercure.Access{Subscribe: []mercure.Match{{Pattern: topicA}}})
		th := startSessionHub(t, sessions, opts...)
		s := th.subscribe("match="+url.QueryEscape(topicA), cookie("alice")...)
		sessions.mu.Lock()
		sessions.block = true
		sessions.mu.Unlock()
		calls := sessions.calls.Load()
		testwait.For(t, "a re-check under way", func() bool { return sessions.calls.Load() > calls })
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
		defer cancel()
		if err := th.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		endsCleanly(t, s)
	})
}

func TestWithAuthorizer_Invalid(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	for name, opt := range map[string]mercure.Option{
		"nil":  mercure.WithAuthorizer(nil, time.Minute),
		"zero": mercure.WithAuthorizer(sessions.authorize, 0),
		"neg":  mercure.WithAuthorizer(sessions.authorize, -time.Second),
	} {
		if _, err := mercure.New(testHubURL, opt); !errors.Is(err, mercure.ErrInvalidOption) {
			t.Errorf("%s: New: %v, want ErrInvalidOption", name, err)
		}
	}
}

// recordLog is a slog.Handler keeping the records.
type recordLog struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordLog) WithGroup(string) slog.Handler      { return l }

func (l *recordLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = nil
}

// count counts the records at level whose message holds msg.
func (l *recordLog) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.Level == level && strings.Contains(r.Message, msg) {
			n++
		}
	}
	return n
}

// errorsIs counts the records with an error attribute wrapping target.
func (l *recordLog) errorsSaying(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		r.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && strings.HasPrefix(err.Error(), prefix) {
				n++
			}
			return true
		})
	}
	return n
}
