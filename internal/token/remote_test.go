package token

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// fakeSource is a KeySource whose set the test swaps; Refresh publishes
// the pending set.
type fakeSource struct {
	mu        sync.Mutex
	cur       jwk.Set
	pending   jwk.Set // becomes cur on Refresh, when not nil
	err       error
	keys      int
	refreshes int
}

func (f *fakeSource) Keys(context.Context) (jwk.Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys++
	if f.cur == nil {
		return nil, f.err
	}
	return f.cur, nil
}

func (f *fakeSource) Refresh(context.Context) (jwk.Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshes++
	if f.pending != nil {
		f.cur, f.pending = f.pending, nil
	}
	if f.cur == nil {
		return nil, f.err
	}
	return f.cur, nil
}

func (f *fakeSource) counts() (keys, refreshes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys, f.refreshes
}

func dynamicVerifier(t *testing.T, src KeySource) *Verifier {
	t.Helper()
	o := testOptions(t)
	o.Issuers = append(o.Issuers, Issuer{ID: "https://dyn.example", Keys: src})
	v, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func dynToken(t *testing.T, alg string, key any, kid string) string {
	t.Helper()
	c := defaultClaims()
	c["iss"] = "https://dyn.example"
	return mint(t, alg, key, defaultHeader(alg, kid), c, nil)
}

func TestDynamicIssuerBothRoles(t *testing.T) {
	src := &fakeSource{cur: set(t, pubJWK(t, fx.es256, kid("d1")))}
	v := dynamicVerifier(t, src)
	for _, role := range []Role{Publisher, Subscriber} {
		for _, k := range []string{"d1", ""} {
			tok, err := v.Verify(dynToken(t, "ES256", fx.es256, k), role)
			if err != nil {
				t.Fatalf("%s, kid %q: %v", role, k, err)
			}
			if tok.Issuer != "https://dyn.example" {
				t.Errorf("Issuer = %q", tok.Issuer)
			}
		}
	}
	if _, refreshes := src.counts(); refreshes != 0 {
		t.Errorf("%d refreshes for known kids, want 0", refreshes)
	}
	// Another issuer's key never verifies a token of the dynamic issuer.
	if _, err := v.Verify(dynToken(t, "ES256", fx.es256b, ""), Publisher); !errors.Is(err, ErrInvalid) {
		t.Errorf("foreign key: err = %v", err)
	}
}

func TestDynamicIssuerUnknownKidRefreshes(t *testing.T) {
	src := &fakeSource{cur: set(t, pubJWK(t, fx.es256, kid("d1")))}
	v := dynamicVerifier(t, src)
	src.mu.Lock()
	src.pending = set(t, pubJWK(t, fx.es256, kid("d1")), pubJWK(t, fx.es256b, kid("d2")))
	src.mu.Unlock()
	if _, err := v.Verify(dynToken(t, "ES256", fx.es256b, "d2"), Publisher); err != nil {
		t.Fatalf("rotated-in key: %v", err)
	}
	if _, refreshes := src.counts(); refreshes != 1 {
		t.Errorf("%d refreshes, want 1", refreshes)
	}
	// Still unknown after the refresh: rejected, one refresh per token.
	if _, err := v.Verify(dynToken(t, "ES256", fx.es256b, "d3"), Publisher); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown kid: err = %v", err)
	}
	if _, refreshes := src.counts(); refreshes != 2 {
		t.Errorf("%d refreshes, want 2", refreshes)
	}
	// The key set dropped d1: its tokens fail once the set changed.
	src.mu.Lock()
	src.cur = set(t, pubJWK(t, fx.es256b, kid("d2")))
	src.mu.Unlock()
	if _, err := v.Verify(dynToken(t, "ES256", fx.es256, "d1"), Subscriber); !errors.Is(err, ErrInvalid) {
		t.Errorf("dropped key: err = %v", err)
	}
}

func TestDynamicIssuerKeyRules(t *testing.T) {
	weak := make([]byte, 16) // too short an HMAC secret
	if _, err := rand.Read(weak); err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{cur: set(t,
		pubJWK(t, fx.es256, map[string]any{jwk.KeyIDKey: "enc", jwk.KeyUsageKey: "enc"}),
		pubJWK(t, fx.es256b, map[string]any{jwk.KeyIDKey: "es", jwk.AlgorithmKey: jwa.ES256()}),
		pubJWK(t, weak, kid("weak")), // skipped, not fatal, in a dynamic set
		pubJWK(t, fx.hs32, kid("hs")),
	)}
	v := dynamicVerifier(t, src)
	for _, c := range []struct {
		name string
		tok  string
		ok   bool
	}{
		{"sig key", dynToken(t, "ES256", fx.es256b, "es"), true},
		{"enc key", dynToken(t, "ES256", fx.es256, "enc"), false},
		{"alg differs from the key's", dynToken(t, "ES384", fx.es384, "es"), false},
		{"weak HMAC secret", dynToken(t, "HS256", weak, "weak"), false},
		{"HMAC", dynToken(t, "HS256", fx.hs32, "hs"), true},
		{"HS256 with the EC key as secret", dynToken(t, "HS256", []byte("es"), "es"), false},
	} {
		_, err := v.Verify(c.tok, Publisher)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%t", c.name, err, c.ok)
		}
	}
}

func TestDynamicIssuerNoSet(t *testing.T) {
	src := &fakeSource{err: errors.New("AS down")}
	v := dynamicVerifier(t, src)
	_, err := v.Verify(dynToken(t, "ES256", fx.es256, "d1"), Publisher)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "AS down") {
		t.Errorf("err = %v", err)
	}
	// The source recovers: the next token is verified.
	src.mu.Lock()
	src.cur = set(t, pubJWK(t, fx.es256, kid("d1")))
	src.mu.Unlock()
	if _, err := v.Verify(dynToken(t, "ES256", fx.es256, "d1"), Publisher); err != nil {
		t.Errorf("after recovery: %v", err)
	}
}

func TestDynamicIssuerWithStaticKeysRejected(t *testing.T) {
	o := testOptions(t)
	o.Issuers = append(o.Issuers, Issuer{ID: "https://dyn.example", Keys: &fakeSource{}, PublisherKeys: set(t, pubJWK(t, fx.es256, nil))})
	if _, err := New(o); err == nil {
		t.Fatal("New accepted an issuer with both Keys and static sets")
	}
}

// ctxSource checks that VerifyContext hands its context to the source.
type ctxSource struct{ fakeSource }

type ctxKey struct{}

func (c *ctxSource) Keys(ctx context.Context) (jwk.Set, error) {
	if ctx.Value(ctxKey{}) != "req" {
		return nil, errors.New("context not passed")
	}
	return c.fakeSource.Keys(ctx)
}

func TestDynamicIssuerContext(t *testing.T) {
	src := &ctxSource{fakeSource{cur: set(t, pubJWK(t, fx.es256, kid("d1")))}}
	v := dynamicVerifier(t, src)
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "req"), time.Minute)
	defer cancel()
	if _, err := v.VerifyContext(ctx, dynToken(t, "ES256", fx.es256, "d1"), Publisher); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(dynToken(t, "ES256", fx.es256, "d1"), Publisher); err == nil {
		t.Error("Verify passed a context it was not given")
	}
}
