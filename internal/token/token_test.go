package token

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

type tableCase struct {
	name   string
	alg    string // default ES256
	key    any    // default fx.es256
	kid    string // default "a-es256" unless noKid
	noKid  bool   //
	hdr    func(map[string]any)
	claims func(map[string]any)
	// payload replaces the marshalled claims verbatim when non-nil.
	payload string
	// raw builds the whole token, bypassing the rest.
	raw   func(t testing.TB) string
	role  Role
	valid bool
	check func(t *testing.T, tok *Token)
}

func (c tableCase) token(t testing.TB) string {
	if c.raw != nil {
		return c.raw(t)
	}
	alg, key, k := c.alg, c.key, c.kid
	if alg == "" {
		alg = "ES256"
	}
	if key == nil {
		key = fx.es256
	}
	if k == "" && !c.noKid {
		k = "a-es256"
	}
	h := defaultHeader(alg, k)
	if c.hdr != nil {
		c.hdr(h)
	}
	cl := defaultClaims()
	if c.claims != nil {
		c.claims(cl)
	}
	var payload []byte
	if c.payload != "" {
		payload = []byte(c.payload)
	}
	return mint(t, alg, key, h, cl, payload)
}

func details(d ...any) func(map[string]any) {
	return func(c map[string]any) { c["authorization_details"] = d }
}

func detailsRaw(raw string) func(map[string]any) {
	return func(c map[string]any) { c["authorization_details"] = json.RawMessage(raw) }
}

func topic(m string) map[string]any { return map[string]any{"match": m} }

func tableCases() []tableCase {
	pub := []any{"publish"}
	one := []any{topic("https://example.com/a")}
	return []tableCase{
		// --- valid ---
		{name: "valid ES256", valid: true, check: func(t *testing.T, tok *Token) {
			want := &Token{Issuer: issA, Subject: "user-1", ClientID: "client-1", JTI: "jti-1",
				Expiry: testNow.Add(time.Hour), Details: []Detail{{Publish: true, Subscribe: true, Topics: []Matcher{
					{Type: "exact", Match: "https://example.com/books/1"},
					{Type: "urlpattern", Match: "https://example.com/books/:id"}}}}}
			if !tok.Expiry.Equal(want.Expiry) {
				t.Errorf("expiry %v", tok.Expiry)
			}
			want.Expiry = tok.Expiry
			if !reflect.DeepEqual(tok, want) {
				t.Errorf("got %+v\nwant %+v", tok, want)
			}
		}},
		{name: "typ AT+JWT", valid: true, hdr: func(h map[string]any) { h["typ"] = "AT+JWT" }},
		{name: "typ application/at+jwt", valid: true, hdr: func(h map[string]any) { h["typ"] = "application/at+jwt" }},
		{name: "typ Application/AT+jwt", valid: true, hdr: func(h map[string]any) { h["typ"] = "Application/AT+jwt" }},
		{name: "aud array", valid: true, claims: func(c map[string]any) { c["aud"] = []any{"https://x", testResource} }},
		{name: "no kid, several compatible keys", valid: true, noKid: true, key: fx.es256b},
		{name: "no authorization_details", valid: true, claims: func(c map[string]any) { delete(c, "authorization_details") },
			check: func(t *testing.T, tok *Token) {
				if len(tok.Details) != 0 {
					t.Errorf("details = %v", tok.Details)
				}
			}},
		{name: "only foreign details", valid: true, claims: details(
			map[string]any{"type": "payment", "actions": []any{nil}, "instructedAmount": 3},
			map[string]any{"TYPE": DetailType, "actions": 1}, // member names are case-sensitive
			map[string]any{"type": 42},
		), check: func(t *testing.T, tok *Token) {
			if len(tok.Details) != 0 {
				t.Errorf("details = %v", tok.Details)
			}
		}},
		{name: "unknown action and member ignored", valid: true, claims: details(map[string]any{
			"type": DetailType, "actions": []any{"delete", "subscribe"}, "topics": one, "extra": nil,
		}), check: func(t *testing.T, tok *Token) {
			if d := tok.Details[0]; d.Publish || !d.Subscribe {
				t.Errorf("detail = %+v", d)
			}
		}},
		{name: "wildcard with any match_type", valid: true, claims: details(mercureDetail(pub, []any{
			map[string]any{"match": "*", "match_type": "urlpattern"},
			map[string]any{"match": "*", "match_type": "custom"},
			topic("*"),
		})), check: func(t *testing.T, tok *Token) {
			want := []Matcher{{"urlpattern", "*"}, {"custom", "*"}, {"exact", "*"}}
			if !reflect.DeepEqual(tok.Details[0].Topics, want) {
				t.Errorf("topics = %v", tok.Details[0].Topics)
			}
		}},
		{name: "payload object", valid: true, claims: details(map[string]any{
			"type": DetailType, "actions": []any{"subscribe"}, "topics": one, "payload": map[string]any{"a": 1},
		}), check: func(t *testing.T, tok *Token) {
			if string(tok.Details[0].Payload) != `{"a":1}` {
				t.Errorf("payload = %s", tok.Details[0].Payload)
			}
		}},
		{name: "exp within leeway", valid: true, claims: func(c map[string]any) { c["exp"] = testNow.Unix() - 4 }},
		{name: "nbf within leeway", valid: true, claims: func(c map[string]any) { c["nbf"] = testNow.Unix() + 5 }},
		{name: "subscriber key for subscriber", valid: true, role: Subscriber, key: fx.esSub, kid: "a-sub"},

		// --- token shape ---
		{name: "JSON serialization", raw: func(t testing.TB) string {
			parts := strings.Split(tableCase{}.token(t), ".")
			return string(mustJSON(t, map[string]any{"payload": parts[1], "protected": parts[0], "signature": parts[2]}))
		}},
		{name: "JWE compact", raw: func(t testing.TB) string {
			return b64([]byte(`{"alg":"dir","enc":"A256GCM","typ":"at+jwt"}`)) + "..aXY.Y2lwaGVy.dGFn"
		}},
		{name: "too long", claims: func(c map[string]any) { c["pad"] = strings.Repeat("x", 4096) }},
		{name: "whitespace", raw: func(t testing.TB) string { return " " + tableCase{}.token(t) }},
		{name: "tampered payload", raw: func(t testing.TB) string {
			parts := strings.Split(tableCase{}.token(t), ".")
			cl := defaultClaims()
			cl["sub"] = "admin"
			return parts[0] + "." + b64(mustJSON(t, cl)) + "." + parts[2]
		}},

		// --- typ ---
		{name: "typ JWT", hdr: func(h map[string]any) { h["typ"] = "JWT" }},
		{name: "typ missing", hdr: func(h map[string]any) { delete(h, "typ") }},
		{name: "typ at+jwt;x", hdr: func(h map[string]any) { h["typ"] = "at+jwt;x" }},
		{name: "typ application/jwt", hdr: func(h map[string]any) { h["typ"] = "application/jwt" }},

		// --- alg and keys ---
		{name: "alg none", alg: "none"},
		{name: "alg not allowed (RS512)", alg: "RS512", key: fx.rsa, kid: "a-rsa"},
		{name: "header ES384 on ES256 signature", hdr: func(h map[string]any) { h["alg"] = "ES384" }},
		{name: "HS256 with RSA public key as secret", alg: "HS256", key: nil, raw: func(t testing.TB) string {
			return mint(t, "HS256", rsaPublicDER(t), defaultHeader("HS256", "a-rsa"), defaultClaims(), nil)
		}},
		{name: "HS256 with RSA public key, no kid", raw: func(t testing.TB) string {
			return mint(t, "HS256", rsaPublicDER(t), defaultHeader("HS256", ""), defaultClaims(), nil)
		}},
		{name: "key alg RS256, header PS256", alg: "PS256", key: fx.rsaRS256, kid: "a-rsa-rs256"},
		{name: "key use enc", key: fx.esEnc, kid: "a-enc"},
		{name: "attacker key in jwk header", key: fx.attacker, hdr: func(h map[string]any) {
			h["jwk"] = json.RawMessage(mustJSON(nilTB{}, pubJWK(nilTB{}, fx.attacker, nil)))
		}},
		{name: "attacker jku header, no kid", key: fx.attacker, noKid: true, hdr: func(h map[string]any) {
			h["jku"] = "https://attacker.example/jwks.json"
		}},
		{name: "unknown kid", kid: "nope"},
		{name: "iss B signed by A", claims: func(c map[string]any) { c["iss"] = issB }},
		{name: "iss A signed by B", key: fx.esB, kid: "b-es256"},
		{name: "unknown iss", claims: func(c map[string]any) { c["iss"] = "https://evil.example" }},
		{name: "missing iss", claims: func(c map[string]any) { delete(c, "iss") }},
		{name: "publisher key for subscriber", role: Subscriber},
		{name: "subscriber key for publisher", key: fx.esSub, kid: "a-sub"},

		// --- crit, b64 ---
		{name: "crit header", hdr: func(h map[string]any) { h["crit"] = []any{"exp"}; h["exp"] = 1 }},
		{name: "b64 true header", hdr: func(h map[string]any) { h["b64"] = true }},
		{name: "b64 false in crit", hdr: func(h map[string]any) { h["b64"] = false; h["crit"] = []any{"b64"} }},

		// --- time and audience ---
		{name: "exp missing", claims: func(c map[string]any) { delete(c, "exp") }},
		{name: "exp 0", claims: func(c map[string]any) { c["exp"] = 0 }},
		{name: "exp past leeway", claims: func(c map[string]any) { c["exp"] = testNow.Unix() - 5 }},
		{name: "exp not a number", claims: func(c map[string]any) { c["exp"] = "tomorrow" }},
		{name: "nbf future", claims: func(c map[string]any) { c["nbf"] = testNow.Unix() + 6 }},
		{name: "iat future", claims: func(c map[string]any) { c["iat"] = testNow.Unix() + 6 }},
		{name: "aud wrong", claims: func(c map[string]any) { c["aud"] = "https://example.com/" }},
		{name: "aud array without resource", claims: func(c map[string]any) { c["aud"] = []any{"a", "b"} }},
		{name: "aud missing", claims: func(c map[string]any) { delete(c, "aud") }},
		{name: "client_id not a string", claims: func(c map[string]any) { c["client_id"] = 7 }},

		// --- authorization_details ---
		{name: "details object", claims: detailsRaw(`{"type":"` + DetailType + `"}`)},
		{name: "details null", claims: detailsRaw(`null`)},
		{name: "details element not object", claims: details("x")},
		{name: "actions missing", claims: details(map[string]any{"type": DetailType, "topics": one})},
		{name: "actions empty", claims: details(mercureDetail([]any{}, one))},
		{name: "actions null element", claims: details(mercureDetail([]any{nil}, one))},
		{name: "actions number element", claims: details(mercureDetail([]any{"publish", 1}, one))},
		{name: "actions null", claims: details(map[string]any{"type": DetailType, "actions": nil, "topics": one})},
		{name: "topics missing", claims: details(map[string]any{"type": DetailType, "actions": pub})},
		{name: "topics empty", claims: details(mercureDetail(pub, []any{}))},
		{name: "topics null element", claims: details(mercureDetail(pub, []any{nil}))},
		{name: "topics string element", claims: details(mercureDetail(pub, []any{"https://example.com/a"}))},
		{name: "match missing", claims: details(mercureDetail(pub, []any{map[string]any{"match_type": "exact"}}))},
		{name: "match null", claims: details(mercureDetail(pub, []any{map[string]any{"match": nil}}))},
		{name: "match empty", claims: details(mercureDetail(pub, []any{topic("")}))},
		{name: "match_type unknown", claims: details(mercureDetail(pub, []any{map[string]any{"match": "a", "match_type": "regex"}}))},
		{name: "match_type wrong case", claims: details(mercureDetail(pub, []any{map[string]any{"match": "a", "match_type": "Exact"}}))},
		{name: "match_type null", claims: details(mercureDetail(pub, []any{map[string]any{"match": "a", "match_type": nil}}))},
		{name: "payload string", claims: details(map[string]any{"type": DetailType, "actions": pub, "topics": one, "payload": "x"})},
		{name: "payload null", claims: details(map[string]any{"type": DetailType, "actions": pub, "topics": one, "payload": nil})},
		{name: "payload array", claims: details(map[string]any{"type": DetailType, "actions": pub, "topics": one, "payload": []any{}})},
		{name: "too many details", claims: details(mercureDetail(pub, one), mercureDetail(pub, one),
			mercureDetail(pub, one), mercureDetail(pub, one), mercureDetail(pub, one))},
		{name: "too many topics", claims: details(mercureDetail(pub, []any{topic("a"), topic("b"), topic("c"), topic("d"), topic("e")}))},
		{name: "match too long", claims: details(mercureDetail(pub, []any{topic(strings.Repeat("a", 65))}))},
		{name: "CheckMatcher rejects", claims: details(mercureDetail(pub, []any{map[string]any{"match": "bad", "match_type": "urlpattern"}}))},
		{name: "CheckMatcher panics", claims: details(mercureDetail(pub, []any{topic("panic")}))},
		{name: "one bad detail among good ones", claims: details(mercureDetail(pub, one), mercureDetail(pub, []any{nil}))},

		// --- NumericDate claims are JSON numbers (RFC 7519 section 2) ---
		{name: "exp RFC 3339 string", claims: func(c map[string]any) { c["exp"] = "2999-01-01T00:00:00Z" }},
		{name: "exp numeric string", claims: func(c map[string]any) { c["exp"] = "1900003600" }},
		{name: "nbf RFC 3339 string", claims: func(c map[string]any) { c["nbf"] = "2000-01-01T00:00:00Z" }},
		{name: "nbf numeric string", claims: func(c map[string]any) { c["nbf"] = "1800000000" }},
		{name: "iat RFC 3339 string", claims: func(c map[string]any) { c["iat"] = "2000-01-01T00:00:00Z" }},
		{name: "iat numeric string", claims: func(c map[string]any) { c["iat"] = "1800000000" }},
		{name: "exp string under an escaped name", payload: withMembers(func(c map[string]any) { delete(c, "exp") }, `"\u0065xp":"2999-01-01T00:00:00Z"`)},
		{name: "nbf negative", claims: func(c map[string]any) { c["nbf"] = -1 }},
		{name: "iat negative", claims: func(c map[string]any) { c["iat"] = -1 }},
		{name: "nbf far before 1970", payload: withMembers(nil, `"nbf":-1e15`)},
		{name: "exp after year 9999", claims: func(c map[string]any) { c["exp"] = int64(253402300800) }},
		{name: "exp 1e18", payload: withMembers(func(c map[string]any) { delete(c, "exp") }, `"exp":1e18`)},
		{name: "exp fractional", valid: true, claims: func(c map[string]any) { c["exp"] = float64(testNow.Unix()) + 3600.25 }},
		{name: "exp exponent form", valid: true, payload: withMembers(func(c map[string]any) { delete(c, "exp") }, `"exp":1.9000036E9`)},
		{name: "nbf and iat fractional", valid: true, claims: func(c map[string]any) {
			c["nbf"] = float64(testNow.Unix()) - 0.5
			c["iat"] = float64(testNow.Unix()) - 10.125
		}},
		{name: "nbf and iat zero", valid: true, claims: func(c map[string]any) { c["nbf"] = 0; c["iat"] = 0 }},
		{name: "exp 9999-12-31T23:59:59Z", valid: true, claims: func(c map[string]any) { c["exp"] = int64(253402300799) }},

		// --- duplicate members: no parser may pick a different one ---
		{name: "duplicate iss, same value", payload: withMembers(nil, `"iss":"`+issA+`"`)},
		{name: "duplicate iss, other value first", payload: withMembers(nil, `"iss":"https://evil.example"`)},
		{name: "duplicate iss, escaped name", payload: withMembers(nil, `"\u0069ss":"`+issA+`"`)},
		{name: "duplicate exp", payload: withMembers(nil, `"exp":1`)},
		{name: "duplicate aud", payload: withMembers(nil, `"aud":"https://evil.example"`)},
		{name: "duplicate sub", payload: withMembers(nil, `"sub":"admin"`)},
		{name: "duplicate client_id", payload: withMembers(nil, `"client_id":"other"`)},
		{name: "duplicate authorization_details", payload: withMembers(nil, `"authorization_details":[]`)},
		{name: "duplicate unknown claim", payload: withMembers(nil, `"x":1`, `"x":1`)},
		{name: "duplicate actions in a Mercure detail", claims: detailsRaw(
			`[{"type":"` + DetailType + `","actions":["subscribe"],"actions":["publish"],"topics":[{"match":"a"}]}]`)},
		{name: "duplicate topics in a Mercure detail", claims: detailsRaw(
			`[{"type":"` + DetailType + `","actions":["publish"],"topics":[{"match":"a"}],"topics":[{"match":"*"}]}]`)},
		{name: "duplicate payload in a Mercure detail", claims: detailsRaw(
			`[{"type":"` + DetailType + `","actions":["subscribe"],"topics":[{"match":"a"}],"payload":{},"payload":{"a":1}}]`)},
		{name: "duplicate type, Mercure first", claims: detailsRaw(
			`[{"type":"` + DetailType + `","type":"payment","actions":["publish"],"topics":[{"match":"a"}]}]`)},
		{name: "duplicate type, Mercure last", claims: detailsRaw(
			`[{"type":"payment","type":"` + DetailType + `","actions":["publish"],"topics":[{"match":"a"}]}]`)},
		{name: "duplicate type in a foreign detail", claims: detailsRaw(`[{"type":"payment","type":"account"}]`)},
		{name: "duplicate member, escaped name, in a Mercure detail", claims: detailsRaw(
			`[{"type":"` + DetailType + `","actions":["publish"],"topics":[{"match":"a"}],"\u0074opics":[{"match":"*"}]}]`)},
		{name: "duplicate match in a matcher", claims: detailsRaw(
			`[{"type":"` + DetailType + `","actions":["publish"],"topics":[{"match":"https://example.com/a","match":"*"}]}]`)},
		{name: "duplicate match_type in a matcher", claims: detailsRaw(
			`[{"type":"` + DetailType + `","actions":["publish"],"topics":[{"match":"a","match_type":"urlpattern","match_type":"exact"}]}]`)},
		// Foreign details are opaque: nothing is read from them but their
		// type. Neither is anything read from a payload (forwarded as it
		// is) or from inside the value of another claim.
		{name: "duplicate member in a foreign detail", valid: true, claims: detailsRaw(
			`[{"type":"payment","amount":1,"amount":2},{"type":"` + DetailType + `","actions":["publish"],"topics":[{"match":"a"}]}]`),
			check: func(t *testing.T, tok *Token) {
				if len(tok.Details) != 1 {
					t.Errorf("details = %v", tok.Details)
				}
			}},
		{name: "duplicate member inside a payload", valid: true, claims: detailsRaw(
			`[{"type":"` + DetailType + `","actions":["subscribe"],"topics":[{"match":"a"}],"payload":{"a":1,"a":2}}]`)},
		{name: "duplicate member inside another claim", valid: true, payload: withMembers(nil, `"cnf":{"jkt":"a","jkt":"b"}`)},
	}
}

// withMembers returns the default claims, changed by mod when not nil, as
// JSON text with extra members put first: text a map cannot produce
// (duplicates, escaped names, exponents).
func withMembers(mod func(map[string]any), extra ...string) string {
	c := defaultClaims()
	if mod != nil {
		mod(c)
	}
	b := mustJSON(nilTB{}, c)
	return "{" + strings.Join(extra, ",") + "," + string(b[1:])
}

// nilTB lets table literals build JWKs outside a test; it panics on failure.
type nilTB struct{ testing.TB }

func (nilTB) Helper()               {}
func (nilTB) Fatal(args ...any)     { panic(args) }
func (nilTB) Fatalf(string, ...any) { panic("fatal") }

func TestVerifyTable(t *testing.T) {
	v := newTestVerifier(t)
	names := map[string]bool{}
	for _, c := range tableCases() {
		if names[c.name] {
			t.Fatalf("duplicate case %q", c.name)
		}
		names[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			raw := c.token(t)
			tok, err := v.Verify(raw, c.role)
			if c.valid {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				checkInvariants(t, v, tok)
				if c.check != nil {
					c.check(t, tok)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify accepted the token: %+v", tok)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if tok != nil {
				t.Fatalf("token returned with error")
			}
			t.Log(err)
		})
	}
}

// checkInvariants asserts what every accepted token satisfies.
func checkInvariants(t testing.TB, v *Verifier, tok *Token) {
	t.Helper()
	if tok == nil {
		t.Fatal("nil token")
	}
	if _, ok := v.issuers[tok.Issuer]; !ok {
		t.Errorf("issuer %q not trusted", tok.Issuer)
	}
	if tok.Expiry.IsZero() || !v.now().Before(tok.Expiry.Add(v.leeway)) {
		t.Errorf("expiry %v not in the future of %v", tok.Expiry, v.now())
	}
	if len(tok.Details) > v.maxDetails {
		t.Errorf("%d details", len(tok.Details))
	}
	for _, d := range tok.Details {
		checkDetail(t, v, d)
	}
}

func checkDetail(t testing.TB, v *Verifier, d Detail) {
	t.Helper()
	if len(d.Topics) == 0 || len(d.Topics) > v.maxTopics {
		t.Errorf("%d topics", len(d.Topics))
	}
	for _, m := range d.Topics {
		if m.Match == "" || len(m.Match) > v.maxMatchBytes {
			t.Errorf("bad match %q", m.Match)
		}
		if m.Match != MatchAll && m.Type != MatchExact && m.Type != MatchURLPattern {
			t.Errorf("bad type %q", m.Type)
		}
	}
	if d.Payload != nil {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(d.Payload, &obj); err != nil || obj == nil {
			t.Errorf("payload %s is not an object", d.Payload)
		}
	}
}

func TestVerifyEachAlgorithm(t *testing.T) {
	v := newTestVerifier(t)
	for _, c := range []struct {
		alg, kid string
		key      any
	}{
		{"ES256", "a-es256", fx.es256},
		{"ES384", "a-es384", fx.es384},
		{"ES512", "a-es521", fx.es521},
		{"RS256", "a-rsa", fx.rsa},
		{"RS256", "a-rsa-rs256", fx.rsaRS256},
		{"PS256", "a-rsa", fx.rsa},
		{"EdDSA", "a-ed", fx.ed},
		{"HS256", "a-hs32", fx.hs32},
		{"HS384", "a-hs64", fx.hs64},
		{"HS512", "a-hs64", fx.hs64},
		{"HS256", "", fx.hs64}, // no kid
	} {
		t.Run(c.alg+"/"+c.kid, func(t *testing.T) {
			raw := mint(t, c.alg, c.key, defaultHeader(c.alg, c.kid), defaultClaims(), nil)
			tok, err := v.Verify(raw, Publisher)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, v, tok)
		})
	}
	// HS384 needs a 48-byte secret: the 32-byte one is never tried.
	raw := mint(t, "HS384", fx.hs32, defaultHeader("HS384", "a-hs32"), defaultClaims(), nil)
	if _, err := v.Verify(raw, Publisher); !errors.Is(err, ErrInvalid) {
		t.Errorf("HS384 with a 32-byte key: %v", err)
	}
}

func TestVerifyRoleSeparation(t *testing.T) {
	v := newTestVerifier(t)
	pubTok := mint(t, "ES256", fx.es256, defaultHeader("ES256", "a-es256"), defaultClaims(), nil)
	subTok := mint(t, "ES256", fx.esSub, defaultHeader("ES256", "a-sub"), defaultClaims(), nil)
	for _, c := range []struct {
		raw   string
		role  Role
		valid bool
	}{
		{pubTok, Publisher, true}, {pubTok, Subscriber, false},
		{subTok, Subscriber, true}, {subTok, Publisher, false},
		{pubTok, Role(7), false},
	} {
		_, err := v.Verify(c.raw, c.role)
		if (err == nil) != c.valid || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("role %v valid=%v: err %v", c.role, c.valid, err)
		}
	}
	// Issuer B has no subscriber keys at all.
	bTok := mint(t, "ES256", fx.esB, defaultHeader("ES256", "b-es256"), map[string]any{
		"iss": issB, "aud": testResource, "exp": testNow.Unix() + 60}, nil)
	if _, err := v.Verify(bTok, Publisher); err != nil {
		t.Errorf("B publisher: %v", err)
	}
	if _, err := v.Verify(bTok, Subscriber); !errors.Is(err, ErrInvalid) {
		t.Errorf("B subscriber: %v", err)
	}
}

func TestVerifyLeewayBoundaries(t *testing.T) {
	o := testOptions(t)
	now := testNow
	o.Now = func() time.Time { return now }
	v, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	base := testNow.Unix()
	for _, c := range []struct {
		name  string
		claim string
		value int64
		now   time.Duration // offset of the clock from testNow
		valid bool
	}{
		{"exp now+1", "exp", base + 1, 0, true},
		{"exp now", "exp", base, 0, true},
		{"exp now-4s", "exp", base - 4, 0, true},
		{"exp now-5s+1ns clock", "exp", base, 5*time.Second - time.Nanosecond, true},
		{"exp now-5s", "exp", base - 5, 0, false},
		{"exp now-6s", "exp", base - 6, 0, false},
		{"nbf now+5s", "nbf", base + 5, 0, true},
		{"nbf now+5s+1ns", "nbf", base + 5, -time.Nanosecond, false},
		{"nbf now+6s", "nbf", base + 6, 0, false},
		{"iat now+5s", "iat", base + 5, 0, true},
		{"iat now+6s", "iat", base + 6, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			now = testNow.Add(c.now)
			cl := defaultClaims()
			cl["exp"] = base + 3600
			cl[c.claim] = c.value
			_, err := v.Verify(mint(t, "HS256", fx.hs32, defaultHeader("HS256", "a-hs32"), cl, nil), Publisher)
			if (err == nil) != c.valid {
				t.Errorf("valid=%v, err=%v", c.valid, err)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("err %v", err)
			}
		})
	}
}

// TestVerifyDuplicateIss: a duplicated "iss" is refused whichever
// occurrence names the issuer whose key signed the token, so that no
// reader, taking the first or the last, can see another issuer.
func TestVerifyDuplicateIss(t *testing.T) {
	v := newTestVerifier(t)
	for _, payload := range []string{
		`{"iss":"` + issB + `","iss":"` + issA + `","aud":"` + testResource + `","exp":2000000000}`,
		`{"iss":"` + issA + `","iss":"` + issB + `","aud":"` + testResource + `","exp":2000000000}`,
		`{"iss":"` + issA + `","iss":"` + issA + `","aud":"` + testResource + `","exp":2000000000}`,
	} {
		raw := mint(t, "ES256", fx.es256, defaultHeader("ES256", "a-es256"), nil, []byte(payload))
		tok, err := v.Verify(raw, Publisher)
		if err == nil {
			t.Errorf("accepted %s as iss %q", payload, tok.Issuer)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("err %v", err)
		}
		t.Logf("rejected %s: %v", payload, err)
	}
}

// TestParseDetailsDuplicates: ParseDetails applies the duplicate rule
// itself, for callers that hand it a claim value directly.
func TestParseDetailsDuplicates(t *testing.T) {
	v := newTestVerifier(t)
	const m = `"type":"` + DetailType + `","actions":["publish"],"topics":[{"match":"a"}]`
	for _, c := range []struct {
		name, raw string
		valid     bool
	}{
		{"no duplicate", `[{` + m + `}]`, true},
		{"duplicate actions", `[{` + m + `,"actions":["subscribe"]}]`, false},
		{"duplicate type", `[{` + m + `,"type":"` + DetailType + `"}]`, false},
		{"duplicate type, foreign", `[{"type":"x","\u0074ype":"y"}]`, false},
		{"duplicate match", `[{"type":"` + DetailType + `","actions":["publish"],"topics":[{"match":"a","match":"b"}]}]`, false},
		{"duplicate in a foreign detail", `[{"type":"x","a":1,"a":2},{` + m + `}]`, true},
		{"names differing in case", `[{` + m + `,"Actions":["subscribe"],"TYPE":"x"}]`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ds, err := v.ParseDetails(json.RawMessage(c.raw))
			if c.valid {
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != 1 || !ds[0].Publish || ds[0].Subscribe {
					t.Errorf("details = %+v", ds)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || ds != nil {
				t.Fatalf("details %+v, err %v", ds, err)
			}
			t.Log(err)
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Options)
	}{
		{"empty resource", func(o *Options) { o.Resource = "" }},
		{"no issuers", func(o *Options) { o.Issuers = nil }},
		{"empty issuer id", func(o *Options) { o.Issuers[0].ID = "" }},
		{"duplicate issuers", func(o *Options) { o.Issuers[1].ID = issA }},
		{"negative leeway", func(o *Options) { o.Leeway = -time.Second }},
		{"negative limit", func(o *Options) { o.MaxTopics = -1 }},
		{"alg none", func(o *Options) { o.Algorithms = append(o.Algorithms, jwaNone()) }},
		{"empty algorithms", func(o *Options) { o.Algorithms = jwaEmpty() }},
		{"short HMAC", func(o *Options) { o.Issuers[1].SubscriberKeys = set(t, pubJWK(t, make([]byte, 31), nil)) }},
		{"issuer without keys", func(o *Options) { o.Issuers[1].PublisherKeys = nil }},
		{"too many keys", func(o *Options) {
			s := jwk.NewSet()
			for range MaxKeysPerSet + 1 {
				b := make([]byte, 32)
				b[0] = byte(s.Len())
				_ = s.AddKey(pubJWK(t, b, nil))
			}
			o.Issuers[1].SubscriberKeys = s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions(t)
			c.mod(&o)
			if _, err := New(o); err == nil {
				t.Fatal("New accepted the options")
			} else {
				t.Log(err)
			}
		})
	}
}

// TestNewWeakRSA: jwx v3 already refuses RSA keys under 2048 bits when a
// JWK is imported or parsed; New's own check stays as a second line.
func TestNewWeakRSA(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jwk.Import(&k.PublicKey); err == nil {
		t.Error("jwk.Import accepted a 1024-bit RSA key")
	}
	js := `{"kty":"RSA","e":"AQAB","n":"` + b64(k.N.Bytes()) + `"}`
	pk, err := jwk.ParseKey([]byte(js))
	if err != nil {
		t.Logf("jwk.ParseKey refuses it too: %v", err)
		return
	}
	o := testOptions(t)
	o.Issuers[1].SubscriberKeys = set(t, pk)
	if _, err := New(o); err == nil {
		t.Error("New accepted a 1024-bit RSA key")
	}
}

func jwaNone() jwa.SignatureAlgorithm    { return jwa.NoSignature() }
func jwaEmpty() []jwa.SignatureAlgorithm { return []jwa.SignatureAlgorithm{} }

func TestRoleString(t *testing.T) {
	if Publisher.String() != "publisher" || Subscriber.String() != "subscriber" || Role(9).String() != "Role(9)" {
		t.Error(Publisher, Subscriber, Role(9))
	}
	if !(Matcher{Match: "*"}).MatchesAll() || (Matcher{Match: "a"}).MatchesAll() {
		t.Error("MatchesAll")
	}
}
