package mercure_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/memnet"
)

// fakeAS is an authorization server: RFC 8414 metadata and a JWK Set,
// served over TLS on a loopback address (newFakeAS) or over in-memory
// connections inside a testing/synctest bubble (newBubbleAS).
type fakeAS struct {
	srv    *httptest.Server // nil for a bubble's AS
	url    string           // the server's base URL
	client *http.Client     // reaches the server
	id     string           // issuer identifier: url + "/tenant1"

	mu       sync.Mutex
	keys     map[string]*ecdsa.PrivateKey // kid → key, published in the JWK Set
	issuer   string                       // issuer in the metadata; "" means id
	jwksURI  string                       // jwks_uri in the metadata; "" means the server's own
	failMeta bool
	failJWKS bool

	metaHits atomic.Int32
	jwksHits atomic.Int32
}

func newFakeAS(t *testing.T) *fakeAS {
	t.Helper()
	as := &fakeAS{keys: map[string]*ecdsa.PrivateKey{}}
	as.srv = httptest.NewTLSServer(as.handler())
	t.Cleanup(as.srv.Close)
	as.url, as.client = as.srv.URL, as.srv.Client()
	as.id = as.url + "/tenant1"
	return as
}

// newBubbleAS is newFakeAS for tests in a testing/synctest bubble, so that
// the hub's refresh limit passes on the bubble's clock: the AS is served
// over in-memory connections, at https://as.test. Call it inside the
// bubble; hubs must trust it with WithPrivateNetworkFetches.
//
// Its client's Transport is not an *http.Transport, which the hub then
// uses as it is (with WithPrivateNetworkFetches; it would replace an
// *http.Transport's dialer with a real one). That Transport takes the
// in-memory connection for an established TLS one: the URLs are https,
// as the hub requires of an authorization server, but the bytes are
// plain HTTP. TLS is not what the tests using it check; newFakeAS's is real.
func newBubbleAS(t *testing.T) *fakeAS {
	t.Helper()
	as := &fakeAS{keys: map[string]*ecdsa.PrivateKey{}, url: "https://as.test"}
	srv := memnet.Serve(t, as.handler(), nil)
	tr := srv.Client.Transport.(*http.Transport)
	tr.DialTLSContext = tr.DialContext
	as.client = &http.Client{Transport: opaqueTransport{tr}}
	as.id = as.url + "/tenant1"
	return as
}

// opaqueTransport hides the type of its RoundTripper from the hub.
type opaqueTransport struct{ http.RoundTripper }

// handler serves the metadata and the JWK Set.
func (as *fakeAS) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server/tenant1", func(w http.ResponseWriter, r *http.Request) {
		as.metaHits.Add(1)
		as.mu.Lock()
		defer as.mu.Unlock()
		if as.failMeta {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		iss, jwks := as.issuer, as.jwksURI
		if iss == "" {
			iss = as.id
		}
		if jwks == "" {
			jwks = as.url + "/tenant1/jwks"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "jwks_uri": jwks})
	})
	mux.HandleFunc("/tenant1/jwks", func(w http.ResponseWriter, r *http.Request) {
		as.jwksHits.Add(1)
		as.mu.Lock()
		defer as.mu.Unlock()
		if as.failJWKS {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		set := jwk.NewSet()
		for kid, k := range as.keys {
			key, err := jwk.Import(&k.PublicKey)
			if err != nil {
				panic(err)
			}
			key.Set(jwk.KeyIDKey, kid)
			key.Set(jwk.AlgorithmKey, "ES256")
			key.Set(jwk.KeyUsageKey, "sig")
			set.AddKey(key)
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Header().Set("Cache-Control", "max-age=3600")
		json.NewEncoder(w).Encode(set)
	})
	return mux
}

// setKeys replaces the published keys.
func (as *fakeAS) setKeys(keys map[string]*ecdsa.PrivateKey) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.keys = keys
}

func (as *fakeAS) update(f func(as *fakeAS)) {
	as.mu.Lock()
	defer as.mu.Unlock()
	f(as)
}

// token mints a token of the AS signed with key under kid, granting
// publish and subscribe on every topic.
func (as *fakeAS) token(t *testing.T, key *ecdsa.PrivateKey, kid string) string {
	t.Helper()
	claims := authClaims(detail("publish,subscribe", exactTopic("*")))
	claims["iss"] = as.id
	return mintToken(t, key, map[string]any{"alg": "ES256", "typ": "at+jwt", "kid": kid}, claims)
}

// asOptions are the options of a hub trusting as; refresh is the on-demand
// refresh limit.
func (as *fakeAS) options(refresh time.Duration, extra ...mercure.Option) []mercure.Option {
	return append([]mercure.Option{
		mercure.WithIssuer(mercure.Issuer{ID: as.id, AuthorizationServer: true}),
		mercure.WithHTTPClient(as.client),
		mercure.WithKeyRefreshLimit(refresh),
	}, extra...)
}

// publishStatus publishes with tok and returns the status.
func publishStatus(th *testHub, tok string) int {
	th.t.Helper()
	status, _, _ := th.request(http.MethodPost, "", form("topic", "https://example.com/books/1", "data", "x"), "Authorization", "Bearer "+tok)
	return status
}

// subscribeStatus opens a stream with tok, closes it and returns the status.
func subscribeStatus(th *testHub, tok string) int {
	th.t.Helper()
	s, res := th.trySubscribe(http.MethodGet, "match=https://example.com/books/1", "", "Authorization", "Bearer "+tok)
	if s != nil {
		s.close()
	} else {
		res.Body.Close()
	}
	return res.StatusCode
}

func TestAUTH21_AuthorizationServerTokens(t *testing.T) {
	t.Parallel()
	as := newFakeAS(t)
	k1 := newECKey()
	as.setKeys(map[string]*ecdsa.PrivateKey{"k1": k1})
	th := startHub(t, nil, as.options(time.Hour, mercure.WithPrivateNetworkFetches())...)

	tok := as.token(t, k1, "k1")
	if got := publishStatus(th, tok); got != http.StatusOK {
		t.Fatalf("publish status = %d, want 200", got)
	}
	if got := subscribeStatus(th, tok); got != http.StatusOK {
		t.Fatalf("subscribe status = %d, want 200", got)
	}
	// A key of no issuer, a self-signed token of the AS's iss, is refused,
	// and so is an unknown kid (with no refresh allowed for an hour).
	if got := publishStatus(th, as.token(t, newECKey(), "k1")); got != http.StatusUnauthorized {
		t.Errorf("foreign key: status = %d, want 401", got)
	}
	if got := publishStatus(th, as.token(t, newECKey(), "k9")); got != http.StatusUnauthorized {
		t.Errorf("unknown kid: status = %d, want 401", got)
	}
	if n := as.metaHits.Load(); n != 1 {
		t.Errorf("metadata fetched %d times, want 1", n)
	}
	if n := as.jwksHits.Load(); n != 1 {
		t.Errorf("JWK Set fetched %d times, want 1", n)
	}
}

// TestAUTH21_KeyRotation runs in a synctest bubble: the refresh limit
// passes on the bubble's clock, only when the test sleeps, so every check
// of what happens within the limit runs, however slow the machine.
func TestAUTH21_KeyRotation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const limit = time.Second
		as := newBubbleAS(t)
		k1, k2 := newECKey(), newECKey()
		as.setKeys(map[string]*ecdsa.PrivateKey{"k1": k1})
		th := startBubbleHub(t, nil, as.options(limit, mercure.WithPrivateNetworkFetches())...)

		if got := publishStatus(th, as.token(t, k1, "k1")); got != http.StatusOK {
			t.Fatalf("k1: status = %d, want 200", got)
		}
		hits := as.jwksHits.Load()

		// The AS rotates k2 in. Right after the last fetch, the unknown
		// kid does not trigger a refresh.
		as.setKeys(map[string]*ecdsa.PrivateKey{"k1": k1, "k2": k2})
		if got := publishStatus(th, as.token(t, k2, "k2")); got != http.StatusUnauthorized {
			t.Fatalf("k2 before the refresh limit: status = %d, want 401", got)
		}
		if n := as.jwksHits.Load(); n != hits {
			t.Fatalf("JWK Set fetched %d more times within the refresh limit", n-hits)
		}

		// Once the limit has passed, concurrent tokens with the new kid
		// make one fetch, and all of them are then accepted.
		time.Sleep(limit)
		hits = as.jwksHits.Load()
		var wg sync.WaitGroup
		statuses := make([]int, 8)
		for i := range statuses {
			wg.Go(func() { statuses[i] = publishStatus(th, as.token(t, k2, "k2")) })
		}
		wg.Wait()
		for i, s := range statuses {
			if s != http.StatusOK {
				t.Errorf("k2 token %d after the refresh: status = %d, want 200", i, s)
			}
		}
		if n := as.jwksHits.Load() - hits; n != 1 {
			t.Errorf("JWK Set fetched %d times for the new kid, want 1", n)
		}
		// The old key still works while the set has it.
		if got := subscribeStatus(th, as.token(t, k1, "k1")); got != http.StatusOK {
			t.Errorf("k1 after rotation: status = %d, want 200", got)
		}

		// The AS drops k1: once refreshed, its tokens are refused.
		as.setKeys(map[string]*ecdsa.PrivateKey{"k2": k2})
		time.Sleep(limit)
		if got := publishStatus(th, as.token(t, k2, "k3")); got != http.StatusUnauthorized { // unknown kid: refresh
			t.Errorf("unknown kid k3: status = %d, want 401", got)
		}
		if got := publishStatus(th, as.token(t, k1, "k1")); got != http.StatusUnauthorized {
			t.Errorf("k1 after removal: status = %d, want 401", got)
		}
		if got := publishStatus(th, as.token(t, k2, "k2")); got != http.StatusOK {
			t.Errorf("k2 after removal of k1: status = %d, want 200", got)
		}
	})
}

// TestAUTH21_FailedRefreshKeepsLastGoodSet runs in a synctest bubble (see
// TestAUTH21_KeyRotation).
func TestAUTH21_FailedRefreshKeepsLastGoodSet(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const limit = 100 * time.Millisecond
		as := newBubbleAS(t)
		k1 := newECKey()
		as.setKeys(map[string]*ecdsa.PrivateKey{"k1": k1})
		th := startBubbleHub(t, nil, as.options(limit, mercure.WithPrivateNetworkFetches())...)
		if got := publishStatus(th, as.token(t, k1, "k1")); got != http.StatusOK {
			t.Fatalf("k1: status = %d, want 200", got)
		}
		as.update(func(as *fakeAS) { as.failJWKS = true })
		time.Sleep(limit)
		hits := as.jwksHits.Load()
		if got := publishStatus(th, as.token(t, k1, "k2")); got != http.StatusUnauthorized {
			t.Errorf("unknown kid: status = %d, want 401", got)
		}
		if as.jwksHits.Load() == hits {
			t.Error("unknown kid did not trigger a refresh")
		}
		if got := publishStatus(th, as.token(t, k1, "k1")); got != http.StatusOK {
			t.Errorf("k1 after a failed refresh: status = %d, want 200", got)
		}
	})
}

// TestAUTH21_FirstFetchFailsThenRecovers runs in a synctest bubble (see
// TestAUTH21_KeyRotation).
func TestAUTH21_FirstFetchFailsThenRecovers(t *testing.T) {
	t.Parallel()
	const limit = 200 * time.Millisecond
	for _, c := range []struct {
		name string
		fail func(as *fakeAS, on bool)
	}{
		{"metadata", func(as *fakeAS, on bool) { as.failMeta = on }},
		{"jwks", func(as *fakeAS, on bool) { as.failJWKS = on }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				as := newBubbleAS(t)
				k1 := newECKey()
				as.setKeys(map[string]*ecdsa.PrivateKey{"k1": k1})
				as.update(func(as *fakeAS) { c.fail(as, true) })
				th := startBubbleHub(t, nil, as.options(limit, mercure.WithPrivateNetworkFetches())...)
				tok := as.token(t, k1, "k1")
				// The hub cannot verify any token of the issuer yet: its
				// fault, not the token's, and it passes. 503 with
				// Retry-After, and to an EventSource a stream that retries
				// (an EventSource gives up for good on any status but 200).
				status, body, hdr := th.request(http.MethodPost, "", form("topic", "https://example.com/books/1", "data", "x"), "Authorization", "Bearer "+tok)
				if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(body, "not available yet") {
					t.Fatalf("while the AS fails: publish status = %d, Retry-After %q, body %q; want 503 saying the keys are not available yet", status, hdr.Get("Retry-After"), body)
				}
				if got := subscribeStatus(th, tok); got != http.StatusServiceUnavailable {
					t.Fatalf("while the AS fails: subscribe status = %d, want 503", got)
				}
				res, err := th.httpClient().Do(th.newRequest(context.Background(), http.MethodGet, "match=https://example.com/books/1", "", "Authorization", "Bearer "+tok, "Accept", "text/event-stream"))
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(res.Body) // the retry stream ends by itself
				res.Body.Close()
				if res.StatusCode != http.StatusOK || !strings.Contains(string(raw), "retry:") || !strings.Contains(string(raw), "503") {
					t.Fatalf("while the AS fails: an EventSource's subscribe got %d %q, want 200 with a retry field", res.StatusCode, raw)
				}
				as.update(func(as *fakeAS) { c.fail(as, false) })
				time.Sleep(limit)
				if got := publishStatus(th, tok); got != http.StatusOK {
					t.Fatalf("after recovery: status = %d, want 200", got)
				}
			})
		})
	}
}

// wantRefused starts a hub trusting as (with opts) and checks that a
// token signed by one of its keys is refused: 503, since the hub has no
// keys of the issuer to verify it with (its configuration or the
// authorization server is at fault, not the token).
func wantRefused(t *testing.T, as *fakeAS, opts ...mercure.Option) {
	t.Helper()
	k1 := newECKey()
	as.setKeys(map[string]*ecdsa.PrivateKey{"k1": k1})
	th := startHub(t, nil, as.options(time.Hour, opts...)...)
	if got := publishStatus(th, as.token(t, k1, "k1")); got != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", got)
	}
}

func TestAUTH21_MetadataIssuerMismatch(t *testing.T) {
	t.Parallel()
	as := newFakeAS(t)
	as.update(func(as *fakeAS) { as.issuer = as.id + "/" })
	wantRefused(t, as, mercure.WithPrivateNetworkFetches())
	if n := as.jwksHits.Load(); n != 0 {
		t.Errorf("JWK Set fetched %d times, want 0", n)
	}
}

func TestAUTH21_NonHTTPSJWKSURI(t *testing.T) {
	t.Parallel()
	as := newFakeAS(t)
	plain := httptest.NewServer(as.srv.Config.Handler)
	t.Cleanup(plain.Close)
	as.update(func(as *fakeAS) { as.jwksURI = plain.URL + "/tenant1/jwks" })
	wantRefused(t, as, mercure.WithPrivateNetworkFetches())
	if n := as.jwksHits.Load(); n != 0 {
		t.Errorf("JWK Set fetched %d times, want 0", n)
	}
}

func TestSEC11_PrivateAddressesRefusedByDefault(t *testing.T) {
	t.Parallel()
	as := newFakeAS(t)
	wantRefused(t, as)
	if n := as.metaHits.Load() + as.jwksHits.Load(); n != 0 {
		t.Errorf("the loopback AS got %d requests, want 0", n)
	}
}

func TestAUTH21_AuthorizationServerOptions(t *testing.T) {
	t.Parallel()
	set := authKeySet(t, authPubKey)
	for _, c := range []struct {
		name string
		opts []mercure.Option
	}{
		{"static keys", []mercure.Option{mercure.WithIssuer(mercure.Issuer{ID: "https://as.example", AuthorizationServer: true, PublisherKeys: set})}},
		{"http id", []mercure.Option{mercure.WithIssuer(mercure.Issuer{ID: "http://as.example", AuthorizationServer: true})}},
		{"id with query", []mercure.Option{mercure.WithIssuer(mercure.Issuer{ID: "https://as.example/?a=b", AuthorizationServer: true})}},
		{"id with fragment", []mercure.Option{mercure.WithIssuer(mercure.Issuer{ID: "https://as.example/#f", AuthorizationServer: true})}},
		{"relative id", []mercure.Option{mercure.WithIssuer(mercure.Issuer{ID: "as.example", AuthorizationServer: true})}},
		{"nil client", []mercure.Option{mercure.WithHTTPClient(nil)}},
	} {
		_, err := mercure.New(testHubURL, c.opts...)
		if !errors.Is(err, mercure.ErrInvalidOption) {
			t.Errorf("%s: err = %v, want ErrInvalidOption", c.name, err)
		}
	}
}

func TestDIS7_AuthorizationServersListed(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, withAuthIssuer(t),
		mercure.WithIssuer(mercure.Issuer{ID: "https://as.example/tenant1", AuthorizationServer: true}),
		mercure.WithIssuer(mercure.Issuer{ID: "https://as2.example", AuthorizationServer: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, h.MetadataPath(), nil))
	var doc struct {
		AuthServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if want := []string{"https://as.example/tenant1", "https://as2.example"}; !slices.Equal(doc.AuthServers, want) {
		t.Errorf("authorization_servers = %q, want %q", doc.AuthServers, want)
	}
}
