package mercure_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure"
)

// signerFor returns a signer for a private key and the JWK Set that
// verifies its tokens.
func signerFor(t *testing.T, raw any) (*mercure.Signer, jwk.Set) {
	t.Helper()
	key, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	_ = key.Set(jwk.KeyIDKey, "k1")
	verify := key
	if _, isSecret := raw.([]byte); !isSecret {
		if verify, err = key.PublicKey(); err != nil {
			t.Fatal(err)
		}
	}
	set := jwk.NewSet()
	if err := set.AddKey(verify); err != nil {
		t.Fatal(err)
	}
	s, err := mercure.NewSigner(key, "https://app.example.com", testHubURL)
	if err != nil {
		t.Fatal(err)
	}
	return s, set
}

// Tokens minted by a Signer are accepted by a hub trusting its key, for
// every key type; their grants are enforced.
func TestSigner_RoundTrip(t *testing.T) {
	t.Parallel()
	ec256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	secret := make([]byte, 32)
	rand.Read(secret)

	for name, raw := range map[string]any{"ES256": ec256, "ES384": ec384, "RS256": rsaKey, "EdDSA": edKey, "HS256": secret} {
		t.Run(name, func(t *testing.T) {
			signer, set := signerFor(t, raw)
			th := startHub(t, nil, mercure.WithIssuer(mercure.Issuer{ID: "https://app.example.com", PublisherKeys: set, SubscriberKeys: set}))
			sub, err := signer.Token(mercure.Grant{Subject: "alice",
				Subscribe: []mercure.Match{{Pattern: "https://example.com/users/alice/{*}?", Type: mercure.MatchURLPattern}}})
			if err != nil {
				t.Fatal(err)
			}
			pub, err := signer.Token(mercure.Grant{Subject: "app", Publish: []mercure.Match{{Pattern: "*"}}})
			if err != nil {
				t.Fatal(err)
			}
			s := th.subscribe("match=*", "Authorization", "Bearer "+sub)
			var ids []string
			for _, topic := range []string{"https://example.com/users/bob/inbox", "https://example.com/users/alice/inbox"} {
				req := mustRequest(t, http.MethodPost, th.endpoint(), "private=on&topic="+topic)
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Authorization", "Bearer "+pub)
				status, body, _ := do(t, req)
				if status != http.StatusOK {
					t.Fatalf("publish with a minted token: %d %s", status, body)
				}
				ids = append(ids, body)
			}
			// Alice's stream gets her private update, not Bob's.
			if ev := s.next(t); ev.ID != ids[1] {
				t.Fatalf("first event %q, want Alice's %q (Bob's is %q)", ev.ID, ids[1], ids[0])
			}
			noPublish := mustRequest(t, http.MethodPost, th.endpoint(), "topic=x")
			noPublish.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			noPublish.Header.Set("Authorization", "Bearer "+sub)
			if status, _, _ := do(t, noPublish); status != http.StatusForbidden {
				t.Fatalf("publish with a subscribe-only token: %d, want 403", status)
			}
		})
	}
}

func TestSigner_RejectsBadGrants(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer, _ := signerFor(t, ec)
	for name, g := range map[string]mercure.Grant{
		"payload not an object": {Subscribe: []mercure.Match{{Pattern: "*"}}, Payload: []int{1}},
		"unknown type":          {Subscribe: []mercure.Match{{Pattern: "x", Type: "regex"}}},
		"empty match":           {Publish: []mercure.Match{{}}},
		"control character":     {Subscribe: []mercure.Match{{Pattern: "a\x00b"}}},
		"negative TTL":          {Publish: []mercure.Match{{Pattern: "x"}}, TTL: -time.Second},
		"match too long":        {Publish: []mercure.Match{{Pattern: strings.Repeat("x", 3000)}}},
		"pattern too costly":    {Subscribe: []mercure.Match{{Pattern: "https://example.com/" + strings.Repeat(":a", 40), Type: mercure.MatchURLPattern}}},
		"too many matches":      {Subscribe: make([]mercure.Match, 65)},
	} {
		if _, err := signer.Token(g); !errors.Is(err, mercure.ErrInvalidGrant) {
			t.Errorf("%s: %v, want ErrInvalidGrant", name, err)
		}
	}
	if _, err := mercure.NewSigner(nil, "iss", testHubURL); !errors.Is(err, mercure.ErrInvalidKey) {
		t.Errorf("NewSigner without a key: %v, want ErrInvalidKey", err)
	}
}

// AUTH-12: the cookie is Secure, HttpOnly, SameSite=Strict, scoped to the
// hub path and expires with the token; the hub accepts it on streams.
func TestAUTH12_SetCookie(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer, set := signerFor(t, ec)
	th := startHub(t, nil, mercure.WithInsecurePublishing(),
		mercure.WithIssuer(mercure.Issuer{ID: "https://app.example.com", SubscriberKeys: set}))
	tok, err := signer.Token(mercure.Grant{Subject: "alice", Subscribe: []mercure.Match{{Pattern: "https://example.com/secret"}}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"not a token", mintToken(t, authSubKey, nil, map[string]any{"sub": "no exp"})} {
		rec := httptest.NewRecorder()
		if err := th.SetCookie(rec, bad); !errors.Is(err, mercure.ErrInvalidToken) || rec.Header().Get("Set-Cookie") != "" {
			t.Fatalf("SetCookie(%q): %v, Set-Cookie %q; want ErrInvalidToken and no cookie", bad, err, rec.Header().Get("Set-Cookie"))
		}
	}
	rec := httptest.NewRecorder()
	if err := th.SetCookie(rec, tok); err != nil {
		t.Fatal(err)
	}
	raw := rec.Header().Get("Set-Cookie")
	for _, want := range []string{mercure.DefaultCookieName + "=" + tok, "Path=/.well-known/mercure", "Secure", "HttpOnly", "SameSite=Strict", "Expires="} {
		if !strings.Contains(raw, want) {
			t.Errorf("Set-Cookie %q lacks %q", raw, want)
		}
	}
	cookie := rec.Result().Cookies()[0]
	if d := time.Until(cookie.Expires); d < 58*time.Minute || d > time.Hour+time.Minute {
		t.Errorf("cookie expires in %v, want the token's hour", d)
	}
	s := th.subscribe("match="+"https%3A%2F%2Fexample.com%2Fsecret", "Cookie", cookie.Name+"="+cookie.Value)
	id, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/secret"}, Private: true})
	if err != nil {
		t.Fatal(err)
	}
	if ev := s.next(t); ev.ID != id {
		t.Fatalf("got %+v, want the private update", ev)
	}
}

// Every token a Signer mints is one the hub it is minted for accepts, or
// the Signer says why not: whatever the Grant, never a token that fails at
// first use. Grants are drawn from valid and invalid parts, combined at
// random.
func TestSigner_MintsOnlyAcceptedTokens(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer, set := signerFor(t, ec)
	th := startHub(t, nil, mercure.WithAnonymousSubscribers(),
		mercure.WithIssuer(mercure.Issuer{ID: "https://app.example.com", PublisherKeys: set, SubscriberKeys: set}))
	matches := []mercure.Match{
		{Pattern: "*"},
		{Pattern: "https://example.com/books/1"},
		{Pattern: "urn:example:x"},
		{Pattern: "https://example.com/books/:id", Type: mercure.MatchURLPattern},
		{Pattern: "/users/{*}?", Type: mercure.MatchURLPattern},
		{Pattern: "https://example.com/(a+)+", Type: mercure.MatchURLPattern},
		{Pattern: "https://example.com/" + strings.Repeat(":a", 40), Type: mercure.MatchURLPattern},
		{Pattern: "https://example.com/" + strings.Repeat("x", 3000)},
		{Pattern: "[", Type: mercure.MatchURLPattern},
		{},
		{Pattern: "x", Type: "regex"},
	}
	payloads := []any{nil, map[string]any{"name": "alice"}, []int{1}, "text"}
	pick := func(r *mrand.Rand) []mercure.Match {
		var ms []mercure.Match
		for range r.IntN(3) {
			ms = append(ms, matches[r.IntN(len(matches))])
		}
		return ms
	}
	r := mrand.New(mrand.NewPCG(1, 2))
	minted, empty := 0, false
	for i := range 300 {
		g := mercure.Grant{Subject: "s", Publish: pick(r), Subscribe: pick(r), Payload: payloads[r.IntN(len(payloads))]}
		tok, err := signer.Token(g)
		if err != nil {
			continue // refused when minted: what the property allows
		}
		minted++
		empty = empty || len(g.Publish)+len(g.Subscribe) == 0
		status := subStatus(th, http.MethodGet, "match=x", "", "Authorization", "Bearer "+tok)
		if status != http.StatusOK {
			t.Fatalf("grant %d %+v: minted, then refused by the hub with %d", i, g, status)
		}
	}
	if minted < 50 || !empty {
		t.Fatalf("%d tokens minted (a grant of nothing among them: %v): the draw tests too little", minted, empty)
	}
}

// A cookie browsers would drop is refused loudly: a hub URL that is
// plain http:// on a host other than localhost gets ErrInsecureCookie,
// and no Set-Cookie; localhost and https hubs get their cookie.
func TestSetCookie_RefusesWhatBrowsersDrop(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for hubURL, ok := range map[string]bool{
		"http://app.internal/.well-known/mercure":      false,
		"http://192.168.1.10:8080/.well-known/mercure": false,
		"http://localhost:8080/.well-known/mercure":    true,
		"http://app.localhost/.well-known/mercure":     true,
		"http://127.0.0.1:3000/.well-known/mercure":    true,
		"http://[::1]:3000/.well-known/mercure":        true,
		"https://app.internal/.well-known/mercure":     true,
	} {
		h, err := mercure.New(hubURL)
		if err != nil {
			t.Fatal(err)
		}
		key, err := jwk.Import(ec)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := mercure.NewSigner(key, "https://app.example.com", hubURL)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := signer.Token(mercure.Grant{Subject: "a", Subscribe: []mercure.Match{{Pattern: "*"}}})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		err = h.SetCookie(rec, tok)
		set := rec.Header().Get("Set-Cookie") != ""
		switch {
		case ok && (err != nil || !set):
			t.Errorf("%s: %v, cookie set: %v", hubURL, err, set)
		case !ok && (!errors.Is(err, mercure.ErrInsecureCookie) || set):
			t.Errorf("%s: %v, cookie set: %v; want ErrInsecureCookie and no cookie", hubURL, err, set)
		}
		h.Shutdown(context.Background())
	}
}
