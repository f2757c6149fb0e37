package mercure_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
)

// AUTH-20, AUTH-32: the token policy's algorithm allowlist and limits;
// a token outside them is invalid_token.
func TestAUTH20_32_TokenPolicy(t *testing.T) {
	t.Parallel()
	const topic = "https://example.com/books/1"
	publish := func(th *testHub, tok string) (int, http.Header) {
		t.Helper()
		status, _, hdr := th.request(http.MethodPost, "", form("topic", topic), "Authorization", "Bearer "+tok)
		return status, hdr
	}
	two := pubToken(t, detail("publish", exactTopic(topic)), detail("publish", exactTopic("x")))

	th := startAuthHub(t, mercure.WithTokenPolicy(mercure.TokenPolicy{Algorithms: []string{"ES384"}}))
	if status, hdr := publish(th, two); status != http.StatusUnauthorized || bareChallenge(hdr.Get("WWW-Authenticate")) != challengeInvalidToken {
		t.Errorf("ES256 token with only ES384 allowed: %d %q", status, hdr.Get("WWW-Authenticate"))
	}
	th = startAuthHub(t, mercure.WithTokenPolicy(mercure.TokenPolicy{MaxDetails: 1}))
	if status, hdr := publish(th, two); status != http.StatusUnauthorized || bareChallenge(hdr.Get("WWW-Authenticate")) != challengeInvalidToken {
		t.Errorf("two details with MaxDetails 1: %d %q", status, hdr.Get("WWW-Authenticate"))
	}
	if status, _ := publish(th, pubToken(t, detail("publish", exactTopic(topic)))); status != http.StatusOK {
		t.Errorf("one detail with MaxDetails 1: %d", status)
	}
	for _, p := range []mercure.TokenPolicy{{Algorithms: []string{"none"}}, {Algorithms: []string{"XX256"}}, {MaxTopics: -1}} {
		if _, err := mercure.New(testHubURL, mercure.WithTokenPolicy(p)); !errors.Is(err, mercure.ErrInvalidOption) {
			t.Errorf("policy %+v: %v", p, err)
		}
	}
}

// PUB-5, PUB-6: a "*" or reserved topic is a 400 whatever the token
// grants: validation runs before the grant check.
func TestPUB5_6_ValidationBeforeGrants(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	none := pubToken(t, detail("publish", exactTopic("https://example.com/other")))
	all := pubToken(t, detail("publish", exactTopic("*")))
	for _, tok := range []string{none, all} {
		for _, topic := range []string{"*", "/.well-known/mercure/subscriptions/x"} {
			if status, body, _ := th.request(http.MethodPost, "", form("topic", topic), "Authorization", "Bearer "+tok); status != http.StatusBadRequest {
				t.Errorf("topic %q: %d, want 400 (%s)", topic, status, body)
			}
		}
	}
}

// A grant whose match holds a control character is invalid (TOP-1): no
// topic can hold it, and grants are compared as strings.
func TestAUTH39_ControlCharacterInMatch(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithAnonymousSubscribers())
	tok := subToken(t, detail("subscribe", exactTopic("x\x00urlpattern\x00https://example.com/secret/*")))
	s, res := th.trySubscribe(http.MethodGet, "match=x", "", "Authorization", "Bearer "+tok)
	if s != nil || res.StatusCode != http.StatusUnauthorized || bareChallenge(res.Header.Get("WWW-Authenticate")) != challengeInvalidToken {
		t.Fatalf("status %d, challenge %q; want 401 invalid_token", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
}

// AUTH-37: a subscriber token past exp but within the clock leeway gets no
// stream (and no replay of private history).
func TestAUTH37_ExpiredWithinLeewayRefused(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	c := authClaims(detail("subscribe", exactTopic("*")))
	c["iat"] = time.Now().Add(-time.Minute).Unix()
	c["exp"] = time.Now().Add(-2 * time.Second).Unix() // the default leeway is 5 s
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Private: true, Data: "history"}); err != nil {
		t.Fatal(err)
	}
	s, res := th.trySubscribe(http.MethodGet, "match=x&last_event_id=earliest", "", "Authorization", "Bearer "+mintToken(t, authSubKey, nil, c))
	if s != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", res.StatusCode)
	}
}

// RFC 7519: NumericDate is a JSON number. A token with a date written as
// a string is an invalid token (401), whatever jwx itself would make of
// it (internal/token also refuses a claim given twice).
func TestAUTH14_DatesAreNumbers(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	grant := detail("publish", exactTopic("https://example.com/books/1"))
	stringExp := authClaims(grant)
	stringExp["exp"] = "2999-01-01T00:00:00Z"
	stringNbf := authClaims(grant)
	stringNbf["nbf"] = "2000-01-01T00:00:00Z"
	for name, claims := range map[string]map[string]any{"string exp": stringExp, "string nbf": stringNbf} {
		tok := mintToken(t, authPubKey, nil, claims)
		status, _, hdr := th.request(http.MethodPost, "", form("topic", "https://example.com/books/1"), "Authorization", "Bearer "+tok)
		if status != http.StatusUnauthorized || bareChallenge(hdr.Get("WWW-Authenticate")) != challengeInvalidToken {
			t.Errorf("%s: %d %q, want 401 invalid_token", name, status, hdr.Get("WWW-Authenticate"))
		}
	}
}
