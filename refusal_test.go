package mercure_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
)

// descriptionValue is an error_description as RFC 6750 section 3 allows
// it: %x20-21 / %x23-5B / %x5D-7E.
var descriptionValue = regexp.MustCompile(`error_description="([\x20\x21\x23-\x5B\x5D-\x7E]*)"`)

// Every refusal names its cause from the fixed vocabulary, in the
// challenge and the problem document, and counts under that reason: a
// valid signature on a refused shape is not a bad signature (AUTH-14,
// AUTH-15, AUTH-16 keep their codes; RFC 6750 section 3 allows the
// description).
func TestAUTH14_RefusalsExplainThemselves(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	claims := func(mod func(map[string]any)) map[string]any {
		c := authClaims(detail("publish", exactTopic("*")))
		mod(c)
		return c
	}
	at := map[string]any{"alg": "ES256", "typ": "at+jwt"}
	for _, c := range []struct {
		reason mercure.TokenFailure
		auth   string
		status int
		code   string // "" for no error attribute
		says   string // in error_description, or in the detail without a code
	}{
		{mercure.TokenMissing, "", 401, "", "an access token is required"},
		{mercure.TokenMalformed, "Basic eDp5", 400, "invalid_request", "must be one Bearer token"},
		{mercure.TokenMalformed, "Bearer not-a-jws", 401, "invalid_token", "malformed: it is not a compact JWS"},
		{mercure.TokenSignature, "Bearer " + mintToken(t, authOtherKey, nil, claims(func(map[string]any) {})), 401, "invalid_token", "signature does not verify"},
		{mercure.TokenAlgorithm, "Bearer " + mintToken(t, authPubKey, map[string]any{"alg": "RS512", "typ": "at+jwt"}, claims(func(map[string]any) {})), 401, "invalid_token", "alg is not one this hub allows (EdDSA, ES256"},
		{mercure.TokenType, "Bearer " + mintToken(t, authPubKey, map[string]any{"alg": "ES256", "typ": "JWT"}, claims(func(map[string]any) {})), 401, "invalid_token", "typ is not at+jwt"},
		{mercure.TokenLegacyClaim, "Bearer " + symfonyToken(t, legacyPublisherSecret, `{"publish":["*"]}`), 401, "invalid_token", "pre-standard"},
		{mercure.TokenExpired, "Bearer " + mintToken(t, authPubKey, at, claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), 401, "invalid_token", "expired"},
		{mercure.TokenNotYetValid, "Bearer " + mintToken(t, authPubKey, at, claims(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() })), 401, "invalid_token", "not valid yet"},
		{mercure.TokenAudience, "Bearer " + mintToken(t, authPubKey, at, claims(func(c map[string]any) { c["aud"] = "https://other.example" })), 401, "invalid_token", "expected " + testHubURL},
		{mercure.TokenIssuer, "Bearer " + mintToken(t, authPubKey, at, claims(func(c map[string]any) { c["iss"] = "https://unknown.example" })), 401, "invalid_token", "iss is not an issuer this hub trusts"},
		{mercure.TokenMalformed, "Bearer " + mintToken(t, authPubKey, at, claims(func(c map[string]any) { delete(c, "exp") })), 401, "invalid_token", "exp is missing"},
		{mercure.TokenGrants, "Bearer " + pubToken(t, detail("publish", exactTopic("https://example.com/other"))), 403, "insufficient_scope", "grants no publish on the canonical topic"},
	} {
		before := th.Metrics().TokenFailures[c.reason]
		var header []string
		if c.auth != "" {
			header = []string{"Authorization", c.auth}
		}
		status, body, hdr := th.request(http.MethodPost, "", form("topic", "https://example.com/books/1", "data", "x"), header...)
		challenge := hdr.Get("WWW-Authenticate")
		var doc struct {
			Detail string
			Status int
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.Status != c.status {
			t.Errorf("%s: problem document %s", c.reason, body)
		}
		switch {
		case status != c.status:
			t.Errorf("%s: status %d, want %d", c.reason, status, c.status)
		case c.code == "" && strings.Contains(challenge, "error"):
			t.Errorf("%s: %q has error information without a token (AUTH-13)", c.reason, challenge)
		case c.code == "" && !strings.Contains(doc.Detail, c.says):
			t.Errorf("%s: detail %q does not say %q", c.reason, doc.Detail, c.says)
		case c.code != "" && !strings.Contains(challenge, `error="`+c.code+`"`):
			t.Errorf("%s: %q, want error=%q", c.reason, challenge, c.code)
		case c.code != "":
			m := descriptionValue.FindStringSubmatch(challenge)
			if m == nil || !strings.Contains(m[1], c.says) {
				t.Errorf("%s: %q has no error_description saying %q", c.reason, challenge, c.says)
			}
			if !strings.Contains(doc.Detail, c.says) {
				t.Errorf("%s: detail %q does not say %q", c.reason, doc.Detail, c.says)
			}
		}
		if tok := strings.TrimPrefix(c.auth, "Bearer "); len(tok) > 20 && (strings.Contains(challenge, tok) || strings.Contains(body, tok)) {
			t.Errorf("%s: the token was echoed", c.reason)
		}
		if got := th.Metrics().TokenFailures[c.reason]; got != before+1 {
			t.Errorf("%s: counted %d times, want once", c.reason, got-before)
		}
	}
}

// A 403 names what lacks the grant and the topic or path it lacks it on,
// in the problem document's detail (the challenge's error_description
// says the same without the topic, which it may not be able to hold): an
// access token's or a session's, on the publish endpoint (AUTH-34), the
// subscriptions API (ACT-13) and the debugger's activity. A subscribe
// request is never refused for want of a grant: its stream gets the
// public updates (AUTH-2).
func TestAUTH34_ForbiddenNamesTheTopic(t *testing.T) {
	t.Parallel()
	sessions := newAppSessions()
	sessions.set("alice", &mercure.Access{Publish: []mercure.Match{{Pattern: topicA}}, Subscribe: []mercure.Match{{Pattern: topicA}}})
	th := startMountedHub(t, withAuthIssuer(t), mercure.WithAuthorizer(sessions.authorize, time.Minute),
		mercure.WithSubscriptions(), mercure.WithDebugger(), mercure.WithLogger(nil))
	pubBooks := "Bearer " + pubToken(t, detail("publish", exactTopic("https://example.com/books/1"), exactTopic("urn:b")))
	subBooks := "Bearer " + subToken(t, detail("subscribe", exactTopic("https://example.com/books/1")))
	const api, activity = "/.well-known/mercure/subscriptions", "/.well-known/mercure/debug/activity"
	for _, c := range []struct {
		name, method, path, body string
		header                   []string
		description, topic       string
		detail                   string // if not description: topic
	}{
		{"token, canonical topic", http.MethodPost, th.Path(), form("topic", "https://example.com/c", "data", "x"),
			[]string{"Authorization", pubBooks}, "the access token grants no publish on the canonical topic of the update", "https://example.com/c", ""},
		{"token, alternate topic", http.MethodPost, th.Path(), form("topic", "https://example.com/books/1", "topic", "urn:b", "topic", "https://example.com/c?x=\"1\"", "data", "x"),
			[]string{"Authorization", pubBooks}, "the access token grants no publish on alternate topic 2 of the update", `https://example.com/c?x="1"`, ""},
		{"session, canonical topic", http.MethodPost, th.Path(), form("topic", topicB, "data", "x"),
			append(cookie("alice"), "Origin", "https://example.com"), "the session grants no publish on the canonical topic of the update", topicB, ""},
		{"token, subscriptions API", http.MethodGet, api, "",
			[]string{"Authorization", subBooks}, "the access token grants no subscribe on this resource of the subscriptions API", api, ""},
		{"session, subscriptions API", http.MethodGet, api, "",
			cookie("alice"), "the session grants no subscribe on this resource of the subscriptions API", api, ""},
		{"token, activity", http.MethodGet, activity, "",
			[]string{"Authorization", subBooks}, "the access token grants no subscribe on the hub's activity topic", activity,
			"the hub's activity is shown to a token or session granting subscribe on " + activity + "; this one does not"},
		{"session, activity", http.MethodGet, activity, "",
			cookie("alice"), "the session grants no subscribe on the hub's activity topic", activity,
			"the hub's activity is shown to a token or session granting subscribe on " + activity + "; this one does not"},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req, err := http.NewRequest(c.method, th.srv.URL+c.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for i := 0; i+1 < len(c.header); i += 2 {
			req.Header.Set(c.header[i], c.header[i+1])
		}
		status, got, hdr := do(t, req)
		var doc struct{ Detail string }
		json.Unmarshal([]byte(got), &doc)
		m := descriptionValue.FindStringSubmatch(hdr.Get("WWW-Authenticate"))
		want := c.detail
		if want == "" {
			want = c.description + ": " + c.topic
		}
		if status != http.StatusForbidden || doc.Detail != want || m == nil || m[1] != c.description {
			t.Errorf("%s: %d, detail %q, challenge %q; want 403, detail %q, error_description %q",
				c.name, status, doc.Detail, hdr.Get("WWW-Authenticate"), want, c.description)
		}
	}
	// The same token on the subscribe endpoint: a stream, not a 403.
	s := th.subscribe("match="+url.QueryEscape("https://example.com/c"), "Authorization", subBooks)
	s.close()
}
