package token

// These tests pin down jwx v3 behaviours that the Verifier works around
// (the pitfalls listed in DEPENDENCIES.md, first measured on v2). Each one
// asserts the behaviour observed on v3.4.0, so an upgrade that changes it
// fails here and the workaround can be reconsidered.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

func pitClaims() map[string]any {
	return map[string]any{"iss": issA, "aud": testResource, "exp": time.Now().Add(time.Hour).Unix()}
}

// observe logs the outcome and fails if it differs from the one measured
// on v3.4.0.
func observe(t *testing.T, what string, err error, accepted bool) bool {
	t.Helper()
	t.Logf("%s: accepted=%v err=%v", what, err == nil, err)
	if (err == nil) != accepted {
		t.Errorf("%s: accepted=%v, v3.4.0 gave %v: jwx behaviour changed, revisit the workaround", what, err == nil, accepted)
	}
	return err == nil
}

// Pitfall 1: the header alg is not compared with the alg given to WithKey.
func TestJWXPitfall1HeaderAlgNotChecked(t *testing.T) {
	raw := mint(t, "ES256", fx.es256, map[string]any{"alg": "ES384", "typ": "at+jwt"}, pitClaims(), nil)
	_, err := jwt.ParseString(raw, jwt.WithKey(jwa.ES256(), &fx.es256.PublicKey))
	observe(t, "header ES384, WithKey(ES256)", err, false)
	raw = mint(t, "ES256", fx.es256, map[string]any{"alg": "none", "typ": "at+jwt"}, pitClaims(), nil)
	_, err2 := jwt.ParseString(raw, jwt.WithKey(jwa.ES256(), &fx.es256.PublicKey))
	observe(t, "header none, WithKey(ES256)", err2, false)
}

// Pitfall 2: exp 0 passes the default validation even with WithRequiredClaim.
func TestJWXPitfall2ExpZero(t *testing.T) {
	cl := pitClaims()
	cl["exp"] = 0
	raw := mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256"}, cl, nil)
	_, err := jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32), jwt.WithRequiredClaim("exp"))
	observe(t, "exp 0", err, false)
	delete(cl, "exp")
	raw = mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256"}, cl, nil)
	_, err = jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32))
	observe(t, "exp missing, no WithRequiredClaim", err, true)
}

// Pitfall 3: WithKeySet without kid, and keys without alg.
func TestJWXPitfall3KeySet(t *testing.T) {
	s := set(t, pubJWK(t, fx.es256, kid("k1")))
	raw := mint(t, "ES256", fx.es256, map[string]any{"alg": "ES256"}, pitClaims(), nil)
	_, err := jwt.ParseString(raw, jwt.WithKeySet(s))
	observe(t, "no kid, stock WithKeySet", err, false)
	_, err = jwt.ParseString(raw, jwt.WithKeySet(s, jws.WithRequireKid(false)))
	observe(t, "no kid, RequireKid(false), key without alg", err, false)
	_, err = jwt.ParseString(raw, jwt.WithKeySet(s, jws.WithRequireKid(false), jws.WithInferAlgorithmFromKey(true)))
	observe(t, "no kid, RequireKid(false)+InferAlgorithmFromKey", err, true)
	raw = mint(t, "ES256", fx.es256, map[string]any{"alg": "ES256", "kid": "k1"}, pitClaims(), nil)
	_, err = jwt.ParseString(raw, jwt.WithKeySet(s))
	observe(t, "kid k1, key without alg", err, false)
}

// Pitfall 4: signing overwrites the header kid with the key's kid.
func TestJWXPitfall4SignOverwritesKid(t *testing.T) {
	priv, err := jwk.Import(fx.hs32)
	if err != nil {
		t.Fatal(err)
	}
	_ = priv.Set(jwk.KeyIDKey, "from-key")
	h := jws.NewHeaders()
	_ = h.Set(jws.KeyIDKey, "from-header")
	_ = h.Set(jws.TypeKey, "at+jwt")
	tok, _ := jwt.NewBuilder().Issuer(issA).Build()
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.HS256(), priv, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := jws.Parse(signed)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := msg.Signatures()[0].ProtectedHeaders().KeyID()
	t.Logf("header kid after signing: %q", k)
	if k != "from-key" {
		t.Errorf("kid %q: jwx no longer overwrites the header kid", k)
	}
}

// Pitfall 5: a misplaced option inside WithKeySet fails only at run time.
func TestJWXPitfall5KeySetSuboption(t *testing.T) {
	s := set(t, pubJWK(t, fx.es256, kid("a-es256")))
	raw := mint(t, "ES256", fx.es256, defaultHeader("ES256", "a-es256"), pitClaims(), nil)
	_, err := jwt.ParseString(raw, jwt.WithKeySet(s, jwt.WithClock(jwt.ClockFunc(time.Now))))
	observe(t, "WithKeySet(set, jwt.WithClock)", err, false)
}

// Pitfall 6: future iat is rejected by default; truncation.
func TestJWXPitfall6IatAndTruncation(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	cl := pitClaims()
	cl["exp"] = now.Unix() + 60
	cl["iat"] = now.Unix() + 60
	raw := mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256"}, cl, nil)
	_, err := jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32), jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })))
	observe(t, "iat in the future", err, false)
	// exp at now exactly, clock 0.5 s later: with 1 s truncation this
	// would pass.
	cl = pitClaims()
	cl["exp"] = now.Unix()
	raw = mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256"}, cl, nil)
	_, err = jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32), jwt.WithClock(jwt.ClockFunc(func() time.Time { return now.Add(-500 * time.Millisecond) })))
	observe(t, "exp=now, clock now-0.5s", err, true)
	_, err = jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32), jwt.WithClock(jwt.ClockFunc(func() time.Time { return now.Add(500 * time.Millisecond) })))
	observe(t, "exp=now, clock now+0.5s (expired unless truncated)", err, false)
}

// Pitfall 7: a typed struct claim decodes null elements silently.
func TestJWXPitfall7TypedClaimNull(t *testing.T) {
	type detail struct {
		Type    string   `json:"type"`
		Actions []string `json:"actions"`
	}
	cl := pitClaims()
	cl["authorization_details"] = json.RawMessage(`[{"type":"x","actions":[null]}]`)
	raw := mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256"}, cl, nil)
	tok, err := jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32), jwt.WithTypedClaim("authorization_details", []detail{}))
	if observe(t, "typed []detail with actions [null]", err, true) {
		var d []detail
		_ = tok.Get("authorization_details", &d)
		t.Logf("decoded: %#v", d)
		if len(d) != 1 || len(d[0].Actions) != 1 || d[0].Actions[0] != "" {
			t.Errorf("null no longer decodes to \"\": %#v", d)
		}
	}
	tok, err = jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32), jwt.WithTypedClaim("authorization_details", json.RawMessage{}))
	if observe(t, "typed RawMessage", err, true) {
		var r json.RawMessage
		err = tok.Get("authorization_details", &r)
		t.Logf("raw: %s err=%v", r, err)
	}
}

// crit, b64 and JSON serialization with a custom key provider.
func TestJWXPitfallCritB64JSON(t *testing.T) {
	kp := jws.KeyProviderFunc(func(_ context.Context, sink jws.KeySink, _ *jws.Signature, _ *jws.Message) error {
		sink.Key(jwa.HS256(), fx.hs32)
		return nil
	})
	crit := mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256", "crit": []any{"foo"}, "foo": 1}, pitClaims(), nil)
	_, err := jwt.ParseString(crit, jwt.WithKeyProvider(kp))
	observe(t, "crit [foo], key provider", err, true)
	_, err = jwt.ParseString(crit, jwt.WithKey(jwa.HS256(), fx.hs32))
	observe(t, "crit [foo], WithKey", err, false)
	// b64:false, crit [b64]: the signature covers the raw payload.
	payload := string(mustJSON(t, pitClaims()))
	hdr := b64(mustJSON(t, map[string]any{"alg": "HS256", "b64": false, "crit": []any{"b64"}}))
	b64f := hdr + "." + payload + "." + b64(signRaw(t, "HS256", fx.hs32, hdr+"."+payload))
	_, err = jwt.ParseString(b64f, jwt.WithKeyProvider(kp))
	observe(t, "b64 false, key provider", err, false)
	parts := strings.Split(mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256"}, pitClaims(), nil), ".")
	js := string(mustJSON(t, map[string]any{"payload": parts[1], "protected": parts[0], "signature": parts[2]}))
	_, err = jwt.ParseString(js, jwt.WithKeyProvider(kp))
	observe(t, "JSON serialization", err, false)
}

// NumericDate leniency: jwx takes strings (digits or RFC 3339) for exp,
// nbf and iat, and any number that fits a time.Time. Only the global
// jwt.Settings(jwt.WithNumericDateParsePedantic(true)) would refuse the
// RFC 3339 strings, so the Verifier checks the claims itself.
func TestJWXPitfallNumericDateLenient(t *testing.T) {
	parse := func(claims string) (jwt.Token, error) {
		raw := mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256"}, nil, []byte(claims))
		return jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32), jwt.WithValidate(false))
	}
	for _, c := range []struct {
		claims   string
		accepted bool
	}{
		{`{"exp":"2999-01-01T00:00:00Z"}`, true},
		{`{"exp":"2000000000"}`, true},
		{`{"nbf":"2000-01-01T00:00:00Z"}`, true},
		{`{"iat":"1800000000"}`, true},
		{`{"nbf":-1}`, true},
		{`{"nbf":-1e15}`, true},
		{`{"exp":1e18}`, true},
		{`{"exp":1e300}`, false},
		{`{"exp":1e400}`, false},
		{`{"exp":9223372036854775807}`, false},
		{`{"exp":null}`, false},
	} {
		_, err := parse(c.claims)
		observe(t, c.claims, err, c.accepted)
	}
	// Fractions are accepted and truncated to whole seconds (the default
	// parse precision).
	tok, err := parse(`{"exp":2000000000.75,"iat":1.9999999995e9}`)
	if observe(t, "fractional exp and iat", err, true) {
		exp, _ := tok.Expiration()
		iat, _ := tok.IssuedAt()
		t.Logf("exp %v, iat %v", exp, iat)
		if !exp.Equal(time.Unix(2000000000, 0)) || !iat.Equal(time.Unix(1999999999, 0)) {
			t.Errorf("exp %v, iat %v: no longer truncated to seconds", exp, iat)
		}
	}
}

// Duplicate claims: jwx keeps the last occurrence, after unescaping the
// name, and ignores whatever follows the claims object.
func TestJWXPitfallDuplicateClaims(t *testing.T) {
	for _, c := range []struct{ claims, iss string }{
		{`{"iss":"first","iss":"last"}`, "last"},
		{`{"iss":"first","\u0069ss":"last"}`, "last"},
		{`{"iss":"only"} trailing`, "only"},
	} {
		raw := mint(t, "HS256", fx.hs32, map[string]any{"alg": "HS256"}, nil, []byte(c.claims))
		tok, err := jwt.ParseString(raw, jwt.WithKey(jwa.HS256(), fx.hs32), jwt.WithValidate(false))
		if !observe(t, c.claims, err, true) {
			continue
		}
		if iss, _ := tok.Issuer(); iss != c.iss {
			t.Errorf("%s: iss %q, v3.4.0 gave %q", c.claims, iss, c.iss)
		}
	}
}

// TestVerifierLeavesJWXSettings: the Verifier refuses a string exp without
// touching jwx's process-wide settings (pitfall 8), which an application
// using jwx itself relies on.
func TestVerifierLeavesJWXSettings(t *testing.T) {
	v := newTestVerifier(t)
	cl := defaultClaims()
	cl["exp"] = "2999-01-01T00:00:00Z"
	raw := mint(t, "ES256", fx.es256, defaultHeader("ES256", "a-es256"), cl, nil)
	if _, err := v.Verify(raw, Publisher); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Verify: %v", err)
	}
	tok, err := jwt.ParseString(raw, jwt.WithKey(jwa.ES256(), &fx.es256.PublicKey), jwt.WithValidate(false))
	if err != nil {
		t.Fatalf("plain jwt.Parse no longer accepts a string exp: %v", err)
	}
	if exp, _ := tok.Expiration(); !exp.Equal(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("plain jwt.Parse: exp %v", exp)
	}
}
