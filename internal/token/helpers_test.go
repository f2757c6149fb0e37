package token

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

const (
	testResource = "https://example.com/.well-known/mercure"
	issA         = "https://as.example.com"
	issB         = "https://other.example.com"
)

// testNow is the fixed clock of the table tests (whole seconds).
var testNow = time.Unix(1_900_000_000, 0)

// fixture holds the generated keys (private halves used for signing).
type fixture struct {
	es256, es256b, es384, es521, esSub, esB, esEnc, attacker *ecdsa.PrivateKey
	rsa, rsaRS256                                            *rsa.PrivateKey
	ed                                                       ed25519.PrivateKey
	hs32, hs64                                               []byte
}

var fx = func() *fixture {
	ec := func(c elliptic.Curve) *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	}
	rk := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	f := &fixture{
		es256: ec(elliptic.P256()), es256b: ec(elliptic.P256()), es384: ec(elliptic.P384()),
		es521: ec(elliptic.P521()), esSub: ec(elliptic.P256()), esB: ec(elliptic.P256()),
		esEnc: ec(elliptic.P256()), attacker: ec(elliptic.P256()),
		rsa: rk(), rsaRS256: rk(), ed: ed,
		hs32: make([]byte, 32), hs64: make([]byte, 64),
	}
	_, _ = rand.Read(f.hs32)
	_, _ = rand.Read(f.hs64)
	return f
}()

// pubJWK imports the public half of priv (or the secret) with the given
// extra fields.
func pubJWK(t testing.TB, priv any, fields map[string]any) jwk.Key {
	t.Helper()
	var raw any = priv
	switch k := priv.(type) {
	case *ecdsa.PrivateKey:
		raw = &k.PublicKey
	case *rsa.PrivateKey:
		raw = &k.PublicKey
	case ed25519.PrivateKey:
		raw = k.Public()
	}
	key, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	for n, v := range fields {
		if err := key.Set(n, v); err != nil {
			t.Fatal(err)
		}
	}
	return key
}

func set(t testing.TB, keys ...jwk.Key) jwk.Set {
	t.Helper()
	s := jwk.NewSet()
	for _, k := range keys {
		if err := s.AddKey(k); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func kid(id string) map[string]any { return map[string]any{jwk.KeyIDKey: id} }

// testOptions is the configuration of the table tests.
func testOptions(t testing.TB) Options {
	return Options{
		Resource: testResource,
		Issuers: []Issuer{
			{
				ID: issA,
				PublisherKeys: set(t,
					pubJWK(t, fx.es256, kid("a-es256")),
					pubJWK(t, fx.es256b, kid("a-es256b")),
					pubJWK(t, fx.es384, kid("a-es384")),
					pubJWK(t, fx.es521, kid("a-es521")),
					pubJWK(t, fx.rsa, kid("a-rsa")),
					pubJWK(t, fx.rsaRS256, map[string]any{jwk.KeyIDKey: "a-rsa-rs256", jwk.AlgorithmKey: jwa.RS256()}),
					pubJWK(t, fx.ed, kid("a-ed")),
					pubJWK(t, fx.hs32, kid("a-hs32")),
					pubJWK(t, fx.hs64, kid("a-hs64")),
					pubJWK(t, fx.esEnc, map[string]any{jwk.KeyIDKey: "a-enc", jwk.KeyUsageKey: "enc"}),
				),
				SubscriberKeys: set(t, pubJWK(t, fx.esSub, kid("a-sub"))),
			},
			{
				ID:            issB,
				PublisherKeys: set(t, pubJWK(t, fx.esB, kid("b-es256"))),
			},
		},
		Now:           func() time.Time { return testNow },
		MaxTokenBytes: 4096,
		MaxDetails:    4,
		MaxTopics:     4,
		MaxMatchBytes: 64,
		CheckMatcher: func(_, match string) error {
			if strings.Contains(match, "bad") {
				return errors.New("bad matcher")
			}
			if strings.Contains(match, "panic") {
				panic("matcher panic")
			}
			return nil
		},
	}
}

func newTestVerifier(t testing.TB) *Verifier {
	t.Helper()
	v, err := New(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signRaw signs input with key the way alg prescribes; alg "none" gives an
// empty signature. It lets tests forge any header, which jwx refuses to do.
func signRaw(t testing.TB, alg string, key any, input string) []byte {
	t.Helper()
	hashFor := func(bits string) (crypto.Hash, func() hash.Hash) {
		switch bits {
		case "384":
			return crypto.SHA384, sha512.New384
		case "512":
			return crypto.SHA512, sha512.New
		}
		return crypto.SHA256, sha256.New
	}
	if alg == "none" {
		return nil
	}
	h, newHash := hashFor(alg[len(alg)-3:])
	switch {
	case alg == "EdDSA":
		return ed25519.Sign(key.(ed25519.PrivateKey), []byte(input))
	case strings.HasPrefix(alg, "HS"):
		m := hmac.New(newHash, key.([]byte))
		m.Write([]byte(input))
		return m.Sum(nil)
	}
	d := newHash()
	d.Write([]byte(input))
	digest := d.Sum(nil)
	switch {
	case strings.HasPrefix(alg, "ES"):
		k := key.(*ecdsa.PrivateKey)
		r, s, err := ecdsa.Sign(rand.Reader, k, digest)
		if err != nil {
			t.Fatal(err)
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		out := make([]byte, 2*size)
		r.FillBytes(out[:size])
		s.FillBytes(out[size:])
		return out
	case strings.HasPrefix(alg, "RS"):
		sig, err := rsa.SignPKCS1v15(rand.Reader, key.(*rsa.PrivateKey), h, digest)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	case strings.HasPrefix(alg, "PS"):
		sig, err := rsa.SignPSS(rand.Reader, key.(*rsa.PrivateKey), h, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	t.Fatalf("signRaw: unknown alg %s", alg)
	return nil
}

// mint builds a compact JWS from a header and claims, signed as alg with
// key. payload, when non-nil, replaces the marshalled claims verbatim.
func mint(t testing.TB, alg string, key any, hdr map[string]any, claims map[string]any, payload []byte) string {
	t.Helper()
	if payload == nil {
		payload = mustJSON(t, claims)
	}
	input := b64(mustJSON(t, hdr)) + "." + b64(payload)
	return input + "." + b64(signRaw(t, alg, key, input))
}

func mercureDetail(actions []any, topics []any) map[string]any {
	return map[string]any{"type": DetailType, "actions": actions, "topics": topics}
}

func defaultClaims() map[string]any {
	return map[string]any{
		"iss":       issA,
		"sub":       "user-1",
		"client_id": "client-1",
		"jti":       "jti-1",
		"aud":       testResource,
		"iat":       testNow.Unix() - 10,
		"exp":       testNow.Add(time.Hour).Unix(),
		"authorization_details": []any{
			mercureDetail([]any{"publish", "subscribe"}, []any{
				map[string]any{"match": "https://example.com/books/1"},
				map[string]any{"match": "https://example.com/books/:id", "match_type": "urlpattern"},
			}),
		},
	}
}

func defaultHeader(alg, kid string) map[string]any {
	h := map[string]any{"alg": alg, "typ": "at+jwt"}
	if kid != "" {
		h["kid"] = kid
	}
	return h
}

// rsaPublicDER is the DER encoding of the public RSA key, the classic
// HS256 key-confusion secret.
func rsaPublicDER(t testing.TB) []byte {
	b, err := x509.MarshalPKIXPublicKey(&fx.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
