package token

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

const legacyIssuer = "https://legacy.example"

// legacyVerifier trusts issuer A as testOptions does, and takes legacy
// tokens signed with the 32-byte secret (publishers) or the 64-byte one
// (subscribers).
func legacyVerifier(t testing.TB) *Verifier {
	t.Helper()
	o := testOptions(t)
	o.Legacy = &Legacy{
		PublisherKeys:  set(t, pubJWK(t, fx.hs32, nil)),
		SubscriberKeys: set(t, pubJWK(t, fx.hs64, nil)),
		Issuers:        []string{legacyIssuer},
	}
	v, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// symfonyHeader is the header Symfony's token factory (lcobucci/jwt)
// writes.
var symfonyHeader = map[string]any{"typ": "JWT", "alg": "HS256"}

// symfonyPayload is the claims text Symfony's factory writes: exp with
// microseconds, the mercure claim with publish and subscribe.
func symfonyPayload(exp time.Time, mercure string) []byte {
	return fmt.Appendf(nil, `{"exp":%d.123456,"mercure":%s}`, exp.Unix(), mercure)
}

func TestVerifyLegacy(t *testing.T) {
	v := legacyVerifier(t)
	exp := testNow.Add(time.Hour)
	star := []Matcher{{Type: MatchExact, Match: "*"}}
	for _, c := range []struct {
		name    string
		hdr     map[string]any
		key     []byte
		alg     string
		role    Role
		payload []byte
		claims  map[string]any
		want    *Token // nil: refused
		reason  string
	}{
		{name: "Symfony's publisher token", payload: symfonyPayload(exp, `{"publish":["*"],"subscribe":[]}`),
			want: &Token{Legacy: true, Expiry: exp, Details: []Detail{{Publish: true, Topics: star}}}},
		{name: "subscriber token with templates and a payload", role: Subscriber, key: fx.hs64,
			payload: symfonyPayload(exp, `{"subscribe":["https://example.com/books/{id}","https://example.com/a","{bad"],"payload":{"user":"42"}}`),
			want: &Token{Legacy: true, Expiry: exp, Payload: json.RawMessage(`{"user":"42"}`), Details: []Detail{{Subscribe: true, Topics: []Matcher{
				{Type: MatchURITemplate, Match: "https://example.com/books/{id}"}, {Type: MatchExact, Match: "https://example.com/a"}, {Type: MatchExact, Match: "{bad"}}}}}},
		{name: "no typ", hdr: map[string]any{"alg": "HS256"}, claims: map[string]any{"mercure": map[string]any{"publish": []any{"*"}}},
			want: &Token{Legacy: true, Expiry: maxNumericDateTime, Details: []Detail{{Publish: true, Topics: star}}}},
		{name: "namespaced claim", claims: map[string]any{"exp": exp.Unix(), "https://mercure.rocks/": map[string]any{"publish": []any{"*"}}},
			want: &Token{Legacy: true, Expiry: exp, Details: []Detail{{Publish: true, Topics: star}}}},
		{name: "claim as a string", claims: map[string]any{"exp": exp.Unix(), "mercure": `{"publish":["*"]}`},
			want: &Token{Legacy: true, Expiry: exp, Details: []Detail{{Publish: true, Topics: star}}}},
		{name: "matcher objects", claims: map[string]any{"exp": exp.Unix(), "mercure": map[string]any{"publish": []any{map[string]any{"match": "https://example.com/:id", "match_type": "urlpattern"}}}},
			want: &Token{Legacy: true, Expiry: exp, Details: []Detail{{Publish: true, Topics: []Matcher{{Type: MatchURLPattern, Match: "https://example.com/:id"}}}}}},
		{name: "no claim grants nothing", claims: map[string]any{"exp": exp.Unix(), "sub": "x"},
			want: &Token{Legacy: true, Expiry: exp, Subject: "x"}},
		{name: "trusted iss and this hub's aud", claims: map[string]any{"iss": legacyIssuer, "aud": testResource, "mercure": map[string]any{"publish": []any{"*"}}},
			want: &Token{Legacy: true, Issuer: legacyIssuer, Expiry: maxNumericDateTime, Details: []Detail{{Publish: true, Topics: star}}}},

		{name: "expired", claims: map[string]any{"exp": testNow.Add(-time.Hour).Unix(), "mercure": map[string]any{}}, reason: KindExpired},
		{name: "exp 0", claims: map[string]any{"exp": 0, "mercure": map[string]any{}}, reason: KindExpired},
		{name: "nbf ahead", claims: map[string]any{"nbf": testNow.Add(time.Hour).Unix(), "mercure": map[string]any{}}, reason: KindNotYetValid},
		{name: "another aud", claims: map[string]any{"aud": "https://other.example", "mercure": map[string]any{}}, reason: KindAudience},
		{name: "untrusted iss", claims: map[string]any{"iss": issA, "mercure": map[string]any{}}, reason: KindIssuer},
		{name: "a modern issuer's key", key: nil, alg: "ES256", claims: map[string]any{"mercure": map[string]any{}}, reason: KindSignature},
		{name: "the publisher key for a subscriber", role: Subscriber, claims: map[string]any{"mercure": map[string]any{}}, reason: KindSignature},
		{name: "alg none", alg: "none", claims: map[string]any{"mercure": map[string]any{}}, reason: KindAlgorithm},
		{name: "authorization_details need at+jwt", claims: map[string]any{"mercure": map[string]any{}, "authorization_details": []any{}}, reason: KindType},
		{name: "both claims", claims: map[string]any{"mercure": map[string]any{}, "https://mercure.rocks/": map[string]any{}}, reason: KindMalformed},
		{name: "payload not an object", claims: map[string]any{"mercure": map[string]any{"payload": "x"}}, reason: KindMalformed},
		{name: "selectors not an array", claims: map[string]any{"mercure": map[string]any{"publish": "*"}}, reason: KindMalformed},
		{name: "selector not a string", claims: map[string]any{"mercure": map[string]any{"publish": []any{1}}}, reason: KindMalformed},
		{name: "empty selector", claims: map[string]any{"mercure": map[string]any{"publish": []any{""}}}, reason: KindMalformed},
		{name: "too many selectors", claims: map[string]any{"mercure": map[string]any{"publish": []any{"a", "b", "c", "d", "e"}}}, reason: KindMalformed},
		{name: "selector too long", claims: map[string]any{"mercure": map[string]any{"publish": []any{string(make([]byte, 65))}}}, reason: KindMalformed},
		{name: "CheckMatcher refuses a template", claims: map[string]any{"mercure": map[string]any{"publish": []any{"https://example.com/bad/{id}"}}}, reason: KindMalformed},
		{name: "duplicate member", payload: []byte(`{"mercure":{"publish":["*"],"publish":[]}}`), reason: KindMalformed},
		{name: "duplicate claim", payload: []byte(`{"mercure":{},"mercure":{"publish":["*"]}}`), reason: KindMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr, alg, key := c.hdr, c.alg, any(c.key)
			if hdr == nil {
				hdr = map[string]any{"typ": "JWT", "alg": "HS256"}
			}
			if alg == "" {
				alg = "HS256"
			}
			if c.key == nil {
				key = fx.hs32
			}
			if alg == "ES256" {
				key = fx.es256
				hdr = map[string]any{"typ": "JWT", "alg": "ES256", "kid": "a-es256"}
			}
			if alg == "none" {
				hdr = map[string]any{"typ": "JWT", "alg": "none"}
			}
			tok, err := v.Verify(mint(t, alg, key, hdr, c.claims, c.payload), c.role)
			if c.want == nil {
				if err == nil {
					t.Fatalf("accepted: %+v", tok)
				}
				if got := Reason(err); got != c.reason {
					t.Fatalf("reason %q, want %q (%v)", got, c.reason, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, want := *tok, *c.want
			if !got.Expiry.Equal(want.Expiry) {
				t.Fatalf("expiry %v, want %v", got.Expiry, want.Expiry)
			}
			got.Expiry, want.Expiry = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("token\n%+v, want\n%+v", tok, c.want)
			}
		})
	}
}

// Modern tokens go the modern way whatever the legacy keys: typ at+jwt is
// never verified with them, and a legacy key verifies no modern token.
func TestVerifyLegacyKeepsModern(t *testing.T) {
	v := legacyVerifier(t)
	c := tableCase{}
	if _, err := v.Verify(c.token(t), Publisher); err != nil {
		t.Fatalf("modern token: %v", err)
	}
	modernWithLegacyKey := mint(t, "HS256", fx.hs32, map[string]any{"typ": "at+jwt", "alg": "HS256", "kid": "nope"}, defaultClaims(), nil)
	if _, err := v.Verify(modernWithLegacyKey, Publisher); Reason(err) != KindSignature {
		t.Fatalf("at+jwt signed with a legacy key: %v", err)
	}
}

// A legacy token verified once is remembered, as any token.
func TestVerifyLegacyCached(t *testing.T) {
	v := legacyVerifier(t)
	raw := mint(t, "HS256", fx.hs32, symfonyHeader, nil, symfonyPayload(testNow.Add(time.Hour), `{"publish":["*"]}`))
	for range 3 {
		if _, err := v.Verify(raw, Publisher); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.verifies.Load(); n != 1 {
		t.Fatalf("%d verifications, want 1", n)
	}
}
