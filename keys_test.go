package mercure_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure"
)

// testKeys are generated once: RSA keys take a while.
var testKeys = sync.OnceValue(func() (k struct {
	ec256, ec384, ec521, ec224 *ecdsa.PrivateKey
	rsa2048, rsa1024           *rsa.PrivateKey
	ed                         ed25519.PrivateKey
	secret                     mercure.HMACSecret
}) {
	k.ec256, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k.ec384, _ = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	k.ec521, _ = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	k.ec224, _ = ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	k.rsa2048, _ = rsa.GenerateKey(rand.Reader, 2048)
	k.rsa1024, _ = rsa.GenerateKey(rand.Reader, 1024)
	_, k.ed, _ = ed25519.GenerateKey(rand.Reader)
	k.secret = make(mercure.HMACSecret, 32)
	rand.Read(k.secret)
	return k
})

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pkcs8PEM(t testing.TB, priv crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("PRIVATE KEY", der)
}

func pkixPEM(t testing.TB, pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("PUBLIC KEY", der)
}

// selfSigned returns a self-signed certificate of priv's public key.
func selfSigned(t testing.TB, priv crypto.Signer) *x509.Certificate {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "app"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func jwkOf(t testing.TB, raw any) jwk.Key {
	k, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Keys reads every form of verification key an app may hold, one JWK per
// key.
func TestKeys_Accepts(t *testing.T) {
	t.Parallel()
	k := testKeys()
	cert := selfSigned(t, k.ec256)
	for _, tc := range []struct {
		name string
		keys []any
		want int
	}{
		{"ECDSA P-256", []any{&k.ec256.PublicKey}, 1},
		{"ECDSA P-384 and P-521", []any{k.ec384.Public(), k.ec521.Public()}, 2},
		{"RSA", []any{k.rsa2048.Public()}, 1},
		{"Ed25519", []any{k.ed.Public()}, 1},
		{"certificate", []any{cert}, 1},
		{"HMAC secret", []any{k.secret}, 1},
		{"public JWK", []any{jwkOf(t, k.ed.Public())}, 1},
		{"PEM public key", []any{mercure.PEM(pkixPEM(t, k.rsa2048.Public()))}, 1},
		{"PEM RSA public key", []any{mercure.PEM(pemBlock("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&k.rsa2048.PublicKey)))}, 1},
		{"PEM certificate", []any{mercure.PEM(pemBlock("CERTIFICATE", cert.Raw))}, 1},
		{"PEM bundle with text between blocks", []any{mercure.PEM(
			"old key:\n" + string(pkixPEM(t, k.ec256.Public())) + "new key:\n" + string(pkixPEM(t, k.ed.Public())))}, 2},
		{"mixed", []any{mercure.PEM(pkixPEM(t, k.ec384.Public())), k.ed.Public(), cert}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := mercure.Keys(tc.keys...)
			if err != nil {
				t.Fatal(err)
			}
			if set.Len() != tc.want {
				t.Fatalf("%d keys, want %d", set.Len(), tc.want)
			}
		})
	}
}

// Keys refuses, when called, what a hub could not verify with, and a
// private key given to verify; every error wraps ErrInvalidKey and says
// what to do.
func TestKeys_RefusesMistakes(t *testing.T) {
	t.Parallel()
	k := testKeys()
	ecDER, _ := x509.MarshalECPrivateKey(k.ec256)
	many := make([]any, 17)
	for i := range many {
		many[i] = k.secret
	}
	for _, tc := range []struct {
		name string
		keys []any
		say  string // in the error
	}{
		{"no key", nil, "at least one"},
		{"nil", []any{nil}, "no key"},
		{"ECDSA private key", []any{k.ec256}, "private key"},
		{"RSA private key", []any{k.rsa2048}, "private key"},
		{"Ed25519 private key", []any{k.ed}, "private key"},
		{"private JWK", []any{jwkOf(t, k.ec256)}, "private key"},
		{"PEM PKCS#8 private key", []any{mercure.PEM(pkcs8PEM(t, k.ed))}, "private key"},
		{"PEM EC private key", []any{mercure.PEM(pemBlock("EC PRIVATE KEY", ecDER))}, "private key"},
		{"PEM with a private key among public ones", []any{mercure.PEM(string(pkixPEM(t, k.ed.Public())) + string(pkcs8PEM(t, k.ec256)))}, "private key"},
		{"HMAC secret of 5 bytes", []any{mercure.HMACSecret("short")}, "at least 32"},
		{"HMAC secret of 31 bytes", []any{mercure.HMACSecret(strings.Repeat("s", 31))}, "at least 32"},
		{"oct JWK of 5 bytes", []any{jwkOf(t, []byte("short"))}, "at least 32"},
		{"RSA 1024", []any{k.rsa1024.Public()}, "2048"},
		{"P-224", []any{k.ec224.Public()}, "P-224"},
		{"plain bytes", []any{[]byte(strings.Repeat("s", 32))}, "ambiguous"},
		{"string", []any{strings.Repeat("s", 32)}, "HMACSecret"},
		{"PEM without a block", []any{mercure.PEM("not PEM")}, "no key"},
		{"PEM of no key", []any{mercure.PEM(pemBlock("CERTIFICATE REQUEST", []byte{1}))}, "holds no key"},
		{"PEM encrypted", []any{mercure.PEM(pemBlock("ENCRYPTED PRIVATE KEY", []byte{1}))}, "decrypt"},
		{"PEM corrupt", []any{mercure.PEM(pemBlock("PUBLIC KEY", []byte{1, 2, 3}))}, "PUBLIC KEY"},
		{"nil certificate", []any{(*x509.Certificate)(nil)}, "nil certificate"},
		{"17 keys", many, "at most 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := mercure.Keys(tc.keys...)
			if !errors.Is(err, mercure.ErrInvalidKey) || set != nil {
				t.Fatalf("got %v, %v; want ErrInvalidKey", set, err)
			}
			if !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("error %q does not say %q", err, tc.say)
			}
		})
	}
}

// NewSigner takes every form of signing key an app may hold.
func TestNewSigner_Accepts(t *testing.T) {
	t.Parallel()
	k := testKeys()
	ecDER, _ := x509.MarshalECPrivateKey(k.ec384)
	for _, tc := range []struct {
		name string
		key  any
	}{
		{"ECDSA P-256", k.ec256},
		{"ECDSA P-521", k.ec521},
		{"RSA", k.rsa2048},
		{"Ed25519", k.ed},
		{"HMAC secret", k.secret},
		{"private JWK", jwkOf(t, k.ec256)},
		{"oct JWK", jwkOf(t, []byte(k.secret))},
		{"PEM PKCS#8", mercure.PEM(pkcs8PEM(t, k.ed))},
		{"PEM EC private key after its parameters", mercure.PEM(string(pemBlock("EC PARAMETERS", []byte{6, 5, 43, 129, 4, 0, 34})) + string(pemBlock("EC PRIVATE KEY", ecDER)))},
		{"PEM RSA private key", mercure.PEM(pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k.rsa2048)))},
		{"PEM key and certificate", mercure.PEM(string(pemBlock("CERTIFICATE", selfSigned(t, k.ec256).Raw)) + string(pkcs8PEM(t, k.ec256)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := mercure.NewSigner(tc.key, "https://app.example.com", testHubURL)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Token(mercure.Grant{Subject: "a", Subscribe: []mercure.Match{{Pattern: "*"}}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// NewSigner refuses, when called, what would fail at the first token or
// mint tokens no hub accepts.
func TestNewSigner_RefusesMistakes(t *testing.T) {
	t.Parallel()
	k := testKeys()
	ecWithRSAAlg := jwkOf(t, k.ec256)
	if err := ecWithRSAAlg.Set(jwk.AlgorithmKey, jwa.RS256()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		key      any
		issuer   string
		audience string
		want     error
		say      string
	}{
		{"no key", nil, "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "no key"},
		{"typed nil key", (*ecdsa.PrivateKey)(nil), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "nil key"},
		{"ECDSA public key", &k.ec256.PublicKey, "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "public key cannot sign"},
		{"RSA public key", k.rsa2048.Public(), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "public key cannot sign"},
		{"Ed25519 public key", k.ed.Public(), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "public key cannot sign"},
		{"public JWK", jwkOf(t, k.ec256.Public()), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "public key cannot sign"},
		{"PEM public key", mercure.PEM(pkixPEM(t, k.ec256.Public())), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "no private key"},
		{"PEM certificate", mercure.PEM(pemBlock("CERTIFICATE", selfSigned(t, k.ec256).Raw)), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "no private key"},
		{"PEM two private keys", mercure.PEM(string(pkcs8PEM(t, k.ec256)) + string(pkcs8PEM(t, k.ed))), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "more than one"},
		{"HMAC secret of 5 bytes", mercure.HMACSecret("short"), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "at least 32"},
		{"oct JWK of 5 bytes", jwkOf(t, []byte("short")), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "at least 32"},
		{"RSA 1024", k.rsa1024, "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "2048"},
		{"P-224", k.ec224, "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "P-224"},
		{"JWK whose alg does not fit", ecWithRSAAlg, "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "RS256"},
		{"plain bytes (a PEM file read as is)", pkcs8PEM(t, k.ec256), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "ambiguous"},
		{"string", string(k.secret), "https://app.example.com", testHubURL, mercure.ErrInvalidKey, "HMACSecret"},
		{"empty issuer", k.ec256, "", testHubURL, mercure.ErrInvalidOption, "issuer"},
		{"relative audience", k.ec256, "https://app.example.com", "/.well-known/mercure", mercure.ErrInvalidOption, "audience"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := mercure.NewSigner(tc.key, tc.issuer, tc.audience)
			if !errors.Is(err, tc.want) || s != nil {
				t.Fatalf("got %v, %v; want %v", s, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("error %q does not say %q", err, tc.say)
			}
		})
	}
}

// A JWK Set holding a private key, given to an Issuer, is refused by New,
// as Keys refuses one.
func TestWithIssuer_RefusesPrivateKeys(t *testing.T) {
	t.Parallel()
	k := testKeys()
	set := jwk.NewSet()
	_ = set.AddKey(jwkOf(t, k.rsa2048))
	for name, iss := range map[string]mercure.Issuer{
		"publisher":  {ID: "https://app.example.com", PublisherKeys: set},
		"subscriber": {ID: "https://app.example.com", SubscriberKeys: set},
	} {
		h, err := mercure.New(testHubURL, mercure.WithIssuer(iss))
		if !errors.Is(err, mercure.ErrInvalidOption) || !errors.Is(err, mercure.ErrInvalidKey) {
			if h != nil {
				h.Shutdown(t.Context())
			}
			t.Fatalf("%s keys: %v, want ErrInvalidOption and ErrInvalidKey", name, err)
		}
	}
}

// The property: for every kind of key and every form an app may hold it
// in, a Signer built from the private form mints tokens that a hub built
// with Keys of the public form accepts, for publishers and subscribers,
// whatever the grant it accepted to mint.
func TestKeys_SignerAndHubAgree(t *testing.T) {
	t.Parallel()
	k := testKeys()
	type pair struct {
		name   string
		sign   any
		verify any
	}
	var pairs []pair
	for _, kind := range []struct {
		name string
		priv crypto.Signer
	}{{"P-256", k.ec256}, {"P-384", k.ec384}, {"P-521", k.ec521}, {"RSA", k.rsa2048}, {"Ed25519", k.ed}} {
		pub := kind.priv.Public()
		cert := selfSigned(t, kind.priv)
		pairs = append(pairs,
			pair{kind.name + "/crypto", kind.priv, pub},
			pair{kind.name + "/PEM", mercure.PEM(pkcs8PEM(t, kind.priv)), mercure.PEM(pkixPEM(t, pub))},
			pair{kind.name + "/PEM certificate", mercure.PEM(pkcs8PEM(t, kind.priv)), mercure.PEM(pemBlock("CERTIFICATE", cert.Raw))},
			pair{kind.name + "/JWK", jwkOf(t, kind.priv), cert},
		)
	}
	pairs = append(pairs, pair{"HMAC", k.secret, k.secret}, pair{"HMAC/JWK", jwkOf(t, []byte(k.secret)), k.secret})

	r := mrand.New(mrand.NewPCG(3, 4))
	matches := []mercure.Match{{Pattern: "*"}, {Pattern: "https://example.com/books/1"},
		{Pattern: "/users/{*}?", Type: mercure.MatchURLPattern}, {Pattern: "x", Type: "regex"}}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			signer, err := mercure.NewSigner(p.sign, "https://app.example.com", testHubURL)
			if err != nil {
				t.Fatal(err)
			}
			// An unrelated key beside it: the hub tries each.
			keys, err := mercure.Keys(p.verify, k.ed.Public())
			if err != nil {
				t.Fatal(err)
			}
			th := startHub(t, nil, mercure.WithIssuer(mercure.Issuer{ID: "https://app.example.com", PublisherKeys: keys, SubscriberKeys: keys}))
			minted := 0
			for range 8 {
				g := mercure.Grant{Subject: "s"}
				for range 1 + r.IntN(2) {
					g.Subscribe = append(g.Subscribe, matches[r.IntN(len(matches))])
				}
				tok, err := signer.Token(g)
				if err != nil {
					if !errors.Is(err, mercure.ErrInvalidGrant) {
						t.Fatalf("grant %+v: %v, want ErrInvalidGrant", g, err)
					}
					continue
				}
				minted++
				if status := subStatus(th, http.MethodGet, "match=x", "", "Authorization", "Bearer "+tok); status != http.StatusOK {
					t.Fatalf("grant %+v: minted, then refused with %d", g, status)
				}
			}
			pub, err := signer.Token(mercure.Grant{Subject: "app", Publish: []mercure.Match{{Pattern: "*"}}})
			if err != nil {
				t.Fatal(err)
			}
			req := mustRequest(t, http.MethodPost, th.endpoint(), "topic=https://example.com/books/1")
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer "+pub)
			if status, body, _ := do(t, req); status != http.StatusOK {
				t.Fatalf("publish: %d %s", status, body)
			}
			if minted == 0 {
				t.Fatal("no subscriber token minted")
			}
		})
	}
}
