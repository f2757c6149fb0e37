package token

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// A token presented again is not verified again, for either role, until
// it expires; a clock that steps back past nbf makes it invalid again.
func TestCacheRemembersVerifiedTokens(t *testing.T) {
	o := testOptions(t)
	now := testNow
	o.Now = func() time.Time { return now }
	v, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	cl := defaultClaims()
	cl["nbf"] = testNow.Unix()
	cl["exp"] = testNow.Add(time.Minute).Unix()
	raw := mint(t, "ES256", fx.es256, defaultHeader("ES256", "a-es256"), cl, nil)
	for range 3 {
		if _, err := v.Verify(raw, Publisher); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.verifies.Load(); n != 1 {
		t.Fatalf("one token presented 3 times: verified %d times, want 1", n)
	}
	// Its role is part of the key: as a subscriber token it is checked
	// with the subscriber keys, which do not hold its key.
	if _, err := v.Verify(raw, Subscriber); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a publisher token presented as a subscriber's: %v", err)
	}
	now = testNow.Add(-v.leeway - time.Second) // the clock stepped back
	if _, err := v.Verify(raw, Publisher); !errors.Is(err, ErrInvalid) {
		t.Fatalf("before nbf: %v", err)
	}
	now = testNow.Add(time.Minute + v.leeway)
	if _, err := v.Verify(raw, Publisher); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a remembered token past exp: %v", err)
	}
}

// A key removed from an issuer's fetched set stops validating at once,
// remembered tokens included; a new set that still holds the key has the
// token verified again, once.
func TestCacheFollowsKeyRotation(t *testing.T) {
	src := &fakeSource{cur: set(t, pubJWK(t, fx.es256, kid("d1")))}
	v := dynamicVerifier(t, src)
	raw := dynToken(t, "ES256", fx.es256, "d1")
	for range 2 {
		if _, err := v.Verify(raw, Subscriber); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.verifies.Load(); n != 1 {
		t.Fatalf("verified %d times, want 1", n)
	}
	src.mu.Lock()
	src.cur = set(t, pubJWK(t, fx.es256, kid("d1")), pubJWK(t, fx.es256b, kid("d2")))
	src.mu.Unlock()
	for range 2 {
		if _, err := v.Verify(raw, Subscriber); err != nil {
			t.Fatalf("the key is still in the new set: %v", err)
		}
	}
	if n := v.verifies.Load(); n != 2 {
		t.Fatalf("verified %d times after a new set, want 2", n)
	}
	src.mu.Lock()
	src.cur = set(t, pubJWK(t, fx.es256b, kid("d2")))
	src.mu.Unlock()
	if _, err := v.Verify(raw, Subscriber); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a remembered token whose key left the set: %v", err)
	}
}

// The cache holds at most CacheSize tokens, dropping the least recently
// used; a negative size turns it off.
func TestCacheIsBounded(t *testing.T) {
	o := testOptions(t)
	o.CacheSize = 2
	v, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]string, 3)
	for i := range tokens {
		cl := defaultClaims()
		cl["jti"] = string(rune('a' + i))
		tokens[i] = mint(t, "HS256", fx.hs32, defaultHeader("HS256", "a-hs32"), cl, nil)
		if _, err := v.Verify(tokens[i], Publisher); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.cache.len(); n != 2 {
		t.Fatalf("%d tokens remembered, want 2", n)
	}
	if _, err := v.Verify(tokens[0], Publisher); err != nil || v.verifies.Load() != 4 {
		t.Fatalf("the evicted token: %v, %d verifications, want 4", err, v.verifies.Load())
	}
	o.CacheSize = -1
	if v, err = New(o); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := v.Verify(tokens[0], Publisher); err != nil {
			t.Fatal(err)
		}
	}
	if v.cache != nil || v.verifies.Load() != 2 {
		t.Fatalf("without a cache: %d verifications, want 2", v.verifies.Load())
	}
}

// Concurrent verifications of the same and of different tokens agree.
func TestCacheConcurrent(t *testing.T) {
	v := newTestVerifier(t)
	tokens := make([]string, 4)
	for i := range tokens {
		cl := defaultClaims()
		cl["jti"] = string(rune('a' + i))
		tokens[i] = mint(t, "HS256", fx.hs32, defaultHeader("HS256", "a-hs32"), cl, nil)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				tok, err := v.Verify(tokens[(g+i)%len(tokens)], Publisher)
				if err != nil || tok.JTI != string(rune('a'+(g+i)%len(tokens))) {
					t.Errorf("got %+v, %v", tok, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
