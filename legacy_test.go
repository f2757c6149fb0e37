package mercure_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure"
)

// The secret Symfony's MERCURE_JWT_SECRET holds in these tests; a
// subscriber secret of its own, as MercureBundle's subscriber keys are.
var (
	legacyPublisherSecret  = []byte("!ChangeThisMercureHubJWTSecretKey!")
	legacySubscriberSecret = []byte("!ChangeThisSubscriberJWTSecretKey!")
)

// symfonyToken mints the token Symfony's Mercure component mints with its
// token factory (lcobucci/jwt): header {"typ":"JWT","alg":"HS256"}, claims
// exp (with microseconds) and mercure, HS256 with secret.
func symfonyToken(t testing.TB, secret []byte, mercureClaim string) string {
	t.Helper()
	exp := float64(time.Now().Add(time.Hour).UnixMicro()) / 1e6
	payload := fmt.Sprintf(`{"exp":%.6f,"mercure":%s}`, exp, mercureClaim)
	input := b64url([]byte(`{"typ":"JWT","alg":"HS256"}`)) + "." + b64url([]byte(payload))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + b64url(mac.Sum(nil))
}

// symfonyForm is the body Symfony's Hub::publish posts: its QueryBuilder
// writes each field with PHP's urlencode, the topic field once per topic,
// private=on for a private update, and nothing for fields left null.
func symfonyForm(topics []string, data string, private bool, id, typ string, retry int) string {
	var parts []string
	enc := func(k, v string) { parts = append(parts, k+"="+strings.ReplaceAll(url.QueryEscape(v), "~", "%7E")) }
	for _, tp := range topics {
		enc("topic", tp)
	}
	enc("data", data)
	if private {
		enc("private", "on")
	}
	if id != "" {
		enc("id", id)
	}
	if typ != "" {
		enc("type", typ)
	}
	if retry != 0 {
		enc("retry", fmt.Sprint(retry))
	}
	return strings.Join(parts, "&")
}

func legacyKeys(t testing.TB) mercure.LegacyClients {
	t.Helper()
	pub, err := mercure.Keys(mercure.HMACSecret(legacyPublisherSecret))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := mercure.Keys(mercure.HMACSecret(legacySubscriberSecret))
	if err != nil {
		t.Fatal(err)
	}
	return mercure.LegacyClients{PublisherKeys: pub, SubscriberKeys: sub}
}

// symfonyPublish posts as Symfony's Hub class does.
func symfonyPublish(t testing.TB, th *testHub, tok, body string) (int, string, http.Header) {
	t.Helper()
	return th.request(http.MethodPost, "", body, "Authorization", "Bearer "+tok, "Content-Type", "application/x-www-form-urlencoded")
}

// polyfillURL is the URL event-source-polyfill reconnects to: the URL it
// was given, with its lastEventIdQueryParameterName (lastEventId unless
// set) and the last id appended (encodeURIComponent).
func polyfillURL(query, param, lastID string) string {
	return query + "&" + param + "=" + url.QueryEscape(lastID)
}

// A PHP application on Symfony's component moves to this hub unchanged:
// its legacy token publishes a private update with every field of the
// component's form; a browser subscribing with topic= (a URI template)
// and the mercureAuthorization cookie receives it; and after a cut,
// resuming through lastEventID or the polyfill's lastEventId misses
// nothing.
func TestLegacy_SymfonyApplication(t *testing.T) {
	t.Parallel()
	th := startHub(t, nil, mercure.WithLegacyClients(legacyKeys(t)), mercure.WithSubscriptions())
	pubTok := symfonyToken(t, legacyPublisherSecret, `{"publish":["*"],"subscribe":[]}`)
	subTok := symfonyToken(t, legacySubscriberSecret, `{"subscribe":["https://example.com/books/{id}"],"payload":{"user":"https://example.com/users/1"}}`)
	cookie := mercure.LegacyCookieName + "=" + subTok
	query := "topic=" + url.QueryEscape("https://example.com/books/{id}")

	s := th.subscribe(query, "Cookie", cookie)
	status, id, _ := symfonyPublish(t, th, pubTok, symfonyForm([]string{"https://example.com/books/1", "https://example.com/users/1/books/1"}, "{\"title\":\"Dune\"}", true, "urn:uuid:first", "book", 3000))
	if status != http.StatusOK || id != "urn:uuid:first" {
		t.Fatalf("publish: %d %q", status, id)
	}
	ev := s.next(t)
	if ev.ID != "urn:uuid:first" || ev.Type != "book" || ev.Retry != "3000" || ev.Data != `{"title":"Dune"}` {
		t.Fatalf("event %+v", ev)
	}
	subs, err := th.Subscriptions(context.Background())
	if err != nil || len(subs) != 1 || subs[0].MatchType != mercure.MatchURITemplate || string(subs[0].Payload) != `{"user":"https://example.com/users/1"}` {
		t.Fatalf("subscriptions %+v, %v", subs, err)
	}
	s.close()

	// Published while the subscriber is away.
	var missed []string
	for i := range 2 {
		_, id, _ := symfonyPublish(t, th, pubTok, symfonyForm([]string{fmt.Sprintf("https://example.com/books/%d", i+2)}, "x", true, "", "", 0))
		missed = append(missed, id)
	}
	for name, q := range map[string]string{
		"lastEventID (the drafts)":       query + "&lastEventID=" + url.QueryEscape("urn:uuid:first"),
		"lastEventId (the polyfill)":     polyfillURL(query, "lastEventId", "urn:uuid:first"),
		"Last-Event-ID (before 0.14)":    query + "&Last-Event-ID=" + url.QueryEscape("urn:uuid:first"),
		"the polyfill, named by Mercure": polyfillURL(query, "lastEventID", "urn:uuid:first"),
	} {
		r := th.subscribe(q, "Cookie", cookie, "Accept", "text/event-stream")
		if got := r.header("Mercure-Last-Event-ID"); got != "urn:uuid:first" {
			t.Errorf("%s: Mercure-Last-Event-ID %q", name, got)
		}
		for _, want := range missed {
			if ev := r.next(t); ev.ID != want {
				t.Fatalf("%s: resumed with %q, want %q", name, ev.ID, want)
			}
		}
		r.close()
	}
}

// The token may come in the drafts' authorization query parameter, after
// the header and before the cookies; modern tokens keep working.
func TestLegacy_TokenSources(t *testing.T) {
	t.Parallel()
	th := startHub(t, nil, withAuthIssuer(t), mercure.WithLegacyClients(legacyKeys(t)))
	legacySub := symfonyToken(t, legacySubscriberSecret, `{"subscribe":["*"]}`)
	modernSub := subToken(t, detail("subscribe", exactTopic("*")))
	for name, c := range map[string]struct {
		query  string
		header []string
	}{
		"authorization parameter":             {"authorization=" + legacySub, nil},
		"modern token in the header":          {"", []string{"Authorization", "Bearer " + modernSub}},
		"the configured cookie":               {"", []string{"Cookie", mercure.DefaultCookieName + "=" + modernSub}},
		"legacy cookie":                       {"", []string{"Cookie", mercure.LegacyCookieName + "=" + legacySub}},
		"parameter before cookie":             {"authorization=" + legacySub, []string{"Cookie", mercure.LegacyCookieName + "=bad"}},
		"configured cookie before legacy one": {"", []string{"Cookie", mercure.DefaultCookieName + "=" + modernSub + "; " + mercure.LegacyCookieName + "=bad"}},
	} {
		q := "topic=https%3A%2F%2Fexample.com%2Fsecret"
		if c.query != "" {
			q += "&" + c.query
		}
		s := th.subscribe(q, c.header...)
		goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/secret"}, Data: name, Private: true})
		expectData(t, s, name)
		s.close()
	}
	// The header wins: a bad one is refused, whatever the parameter holds.
	status, _, hdr := th.request(http.MethodGet, "topic=x&authorization="+legacySub, "", "Authorization", "Bearer nope")
	if status != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), "malformed") {
		t.Fatalf("bad header with a good parameter: %d %q", status, hdr.Get("WWW-Authenticate"))
	}
}

// Selectors as the drafts read them: * for everything, a URI template for
// its expansions, anything else as an exact topic; grants likewise.
func TestLegacy_Selectors(t *testing.T) {
	t.Parallel()
	th := startHub(t, nil, mercure.WithLegacyClients(legacyKeys(t)), mercure.WithAnonymousSubscribers())
	pub := symfonyToken(t, legacyPublisherSecret, `{"publish":["https://example.com/books/{id}","/chat/{room}"]}`)
	all := th.subscribe("topic=*")
	books := th.subscribe("topic=" + url.QueryEscape("https://example.com/books/{id}") + "&topic=" + url.QueryEscape("https://example.com/exact{"))
	chat := th.subscribe("topic=" + url.QueryEscape("/chat/{room}"))
	for _, c := range []struct {
		topic  string
		status int
	}{
		{"https://example.com/books/1", 200},
		{"https://example.com/exact{", 403}, // not a template, and not granted
		{"/chat/lobby", 200},
		{"https://example.com/chat/lobby", 200}, // the relative template resolved against the hub URL
		{"https://example.com/movies/1", 403},
	} {
		status, body, hdr := symfonyPublish(t, th, pub, symfonyForm([]string{c.topic}, c.topic, false, "", "", 0))
		if status != c.status {
			t.Fatalf("publish %q: %d %s", c.topic, status, body)
		}
		if status == 403 && !strings.Contains(hdr.Get("WWW-Authenticate"), `error_description="the access token grants no publish on the canonical topic of the update"`) {
			t.Errorf("403 without its description: %q", hdr.Get("WWW-Authenticate"))
		}
	}
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/exact{"}, Data: "exact"})
	for _, want := range []string{"https://example.com/books/1", "/chat/lobby", "https://example.com/chat/lobby", "exact"} {
		expectData(t, all, want)
	}
	expectData(t, books, "https://example.com/books/1")
	expectData(t, books, "exact")
	expectData(t, chat, "/chat/lobby")
	expectData(t, chat, "https://example.com/chat/lobby")
}

// Templates cost what URL patterns cost, and are capped alike.
func TestLegacy_TemplateLimits(t *testing.T) {
	t.Parallel()
	th := startHub(t, nil, mercure.WithLegacyClients(legacyKeys(t)), mercure.WithAnonymousSubscribers(),
		mercure.WithLimits(mercure.Limits{MaxPatternsPerPrefix: 4}))
	for name, c := range map[string]struct {
		query  string
		status int
	}{
		"too many variables for an anonymous stream": {"topic=" + url.QueryEscape("https://example.com/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}"), 400},
		"too long for an anonymous stream":           {"topic=" + url.QueryEscape("https://example.com/"+strings.Repeat("a", 200)+"/{id}"), 400},
		"empty":                                      {"topic=", 400},
	} {
		if s, res := th.trySubscribe(http.MethodGet, c.query, ""); s != nil || res.StatusCode != c.status {
			t.Errorf("%s: %v", name, res.Status)
		}
	}
	// Per-user templates under one prefix: the third distinct one is one
	// too many for anonymous streams, which have half of
	// MaxPatternsPerPrefix.
	for i := range 3 {
		q := "topic=" + url.QueryEscape(fmt.Sprintf("https://example.com/users/%d{/id}", i))
		s, res := th.trySubscribe(http.MethodGet, q, "")
		if want := map[bool]int{true: 429, false: 200}[i == 2]; res.StatusCode != want {
			t.Fatalf("template %d: %d, want %d", i, res.StatusCode, want)
		}
		if s == nil {
			res.Body.Close()
		}
	}
}

// Without the compatibility mode, a pre-standard client learns what to
// change: its token, its topic= subscription, its cookie.
func TestLegacy_DefaultModeExplains(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	th := startHub(t, nil, withAuthIssuer(t), mercure.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	pub := symfonyToken(t, legacyPublisherSecret, `{"publish":["*"],"subscribe":[]}`)
	for range 2 {
		status, body, hdr := symfonyPublish(t, th, pub, symfonyForm([]string{"https://example.com/books/1"}, "x", false, "", "", 0))
		c := hdr.Get("WWW-Authenticate")
		if status != 401 || !strings.Contains(c, `error="invalid_token"`) || !strings.Contains(c, "pre-standard") || !strings.Contains(c, "WithLegacyClients") || !strings.Contains(c, "-legacy-clients") {
			t.Fatalf("legacy publish: %d %q", status, c)
		}
		var doc struct{ Detail string }
		if json.Unmarshal([]byte(body), &doc); !strings.Contains(doc.Detail, "WithLegacyClients") {
			t.Fatalf("problem detail %q", body)
		}
		if strings.Contains(c, pub) || strings.Contains(body, pub) || strings.Contains(logs.String(), pub) {
			t.Fatal("the token was echoed")
		}
	}
	if got := th.Metrics().TokenFailures; got[mercure.TokenLegacyClaim] != 2 || got[mercure.TokenSignature] != 0 {
		t.Fatalf("token failures %v", got)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"mercure: access refused\" reason=legacy_claim"); n != 1 {
		t.Errorf("%d warnings for the legacy claim, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "level=DEBUG msg=\"mercure: access refused\" reason=legacy_claim"); n != 1 {
		t.Errorf("%d debug records for the legacy claim, want 1", n)
	}

	status, body, _ := th.request(http.MethodGet, "topic="+url.QueryEscape("https://example.com/books/{id}"), "", "Authorization", "Bearer "+subToken(t))
	if status != 400 || !strings.Contains(body, "match_urlpattern") || !strings.Contains(body, "WithLegacyClients") {
		t.Fatalf("topic= subscribe: %d %s", status, body)
	}
	status, body, hdr := th.request(http.MethodGet, "match=x", "", "Cookie", mercure.LegacyCookieName+"="+pub)
	if status != 401 || !strings.Contains(body, mercure.LegacyCookieName) || hdr.Get("WWW-Authenticate") == "" {
		t.Fatalf("legacy cookie: %d %s", status, body)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"mercure: a client sent a pre-standard credential, ignored") {
		t.Errorf("the ignored cookie was not logged at Warn")
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Without the compatibility mode too, a client resuming with the
// parameters of older clients misses nothing (spec §Reconnection, State
// Reconciliation, and Event Sourcing: only last_event_id is defined, and
// nothing forbids reading more); the standard ones take precedence.
func TestREC3_ResumeAliases(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	ids := make([]string, 4)
	for i := range ids {
		ids[i] = th.mustPost(form("topic", "a", "data", fmt.Sprint(i)))
	}
	for name, c := range map[string]struct {
		query  string
		header []string
		after  int // the id the replay resumes after
	}{
		"lastEventID":                    {"lastEventID=" + ids[0], nil, 0},
		"the polyfill's lastEventId":     {"lastEventId=" + ids[1], nil, 1},
		"Last-Event-ID in the query":     {"Last-Event-ID=" + ids[2], nil, 2},
		"lastEventID beats lastEventId":  {"lastEventId=" + ids[2] + "&lastEventID=" + ids[1], nil, 1},
		"last_event_id beats them":       {"lastEventID=" + ids[0] + "&last_event_id=" + ids[2], nil, 2},
		"the header beats them":          {"lastEventID=" + ids[0], []string{"Last-Event-ID", ids[1]}, 1},
		"the first of one alias is read": {"lastEventID=" + ids[1] + "&lastEventID=" + ids[0], nil, 1},
	} {
		s := th.subscribe("match=a&"+c.query, c.header...)
		if got := s.header("Mercure-Last-Event-ID"); got != ids[c.after] {
			t.Errorf("%s: Mercure-Last-Event-ID %q, want %q", name, got, ids[c.after])
		}
		if ev := s.next(t); ev.ID != ids[c.after+1] {
			t.Errorf("%s: resumed at %q, want %q", name, ev.ID, ids[c.after+1])
		}
		s.close()
	}
}

// New says at start-up that the compatibility mode is on.
func TestLegacy_WarnsAtStartUp(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h, err := mercure.New(testHubURL, mercure.WithLegacyClients(mercure.LegacyClients{}), mercure.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	if !strings.Contains(logs.String(), "level=WARN msg=\"mercure: compatibility mode for pre-standard clients is on") {
		t.Fatalf("logs: %s", logs.String())
	}
	set := jwk.NewSet()
	_ = set.AddKey(jwkOf(t, testKeys().rsa2048))
	if _, err := mercure.New(testHubURL, mercure.WithLegacyClients(mercure.LegacyClients{PublisherKeys: set})); !errors.Is(err, mercure.ErrInvalidKey) {
		t.Fatalf("a private key among the legacy keys: %v", err)
	}
}

// The metadata says what the compatibility mode accepts besides the
// standard (issue 41): the legacy cookie and claim, the token in the
// query ("query", RFC 6750's name), the drafts' URI templates. A hub
// without the mode says none of it.
func TestLegacy_Metadata(t *testing.T) {
	t.Parallel()
	read := func(opts ...mercure.Option) map[string]any {
		t.Helper()
		h, err := mercure.New(testHubURL, append(opts, mercure.WithLogger(nil))...)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Shutdown(context.Background())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, h.MetadataPath(), nil))
		var doc map[string]any
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &doc) != nil {
			t.Fatalf("metadata: %d %s", rec.Code, rec.Body)
		}
		return doc
	}
	doc := read(mercure.WithLegacyClients(legacyKeys(t)))
	legacy, _ := doc["mercure_legacy"].(map[string]any)
	if legacy["cookie"] != mercure.LegacyCookieName || legacy["claim"] != "mercure" || legacy["query_parameter"] != "authorization" ||
		fmt.Sprint(legacy["matcher_types"]) != "["+mercure.MatchURITemplate+"]" {
		t.Fatalf("mercure_legacy %v", doc["mercure_legacy"])
	}
	if fmt.Sprint(doc["bearer_methods_supported"]) != "[header query]" || doc["mercure_cookie"] != mercure.DefaultCookieName {
		t.Fatalf("bearer_methods_supported %v, mercure_cookie %v; want query and the standard cookie too", doc["bearer_methods_supported"], doc["mercure_cookie"])
	}
	if doc := read(); doc["mercure_legacy"] != nil {
		t.Fatalf("a hub without the mode: mercure_legacy %v", doc["mercure_legacy"])
	}
}
