package mercure_test

import (
	"encoding/json"
	"net/http"
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
		reason, auth string
		status       int
		code         string // "" for no error attribute
		says         string // in error_description, or in the detail without a code
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
