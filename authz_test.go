package mercure_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Access tokens for the authorization tests are minted by hand (ES256,
// compact JWS), so that every header and claim is under the test's control.

const (
	authIssuerID   = "https://issuer.example.com"
	authDetailType = "https://mercure.rocks/authorization-detail"
	authMetadata   = `resource_metadata="https://example.com/.well-known/oauth-protected-resource/.well-known/mercure"`

	challengeNone         = "Bearer " + authMetadata
	challengeInvalidToken = `Bearer error="invalid_token", ` + authMetadata
	challengeInvalidReq   = `Bearer error="invalid_request", ` + authMetadata
	challengeScope        = `Bearer error="insufficient_scope", ` + authMetadata
)

var (
	authPubKey   = newECKey()
	authSubKey   = newECKey()
	authOtherKey = newECKey()
	authJTI      atomic.Int64
)

func newECKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func authKeySet(t testing.TB, k *ecdsa.PrivateKey) jwk.Set {
	t.Helper()
	key, err := jwk.Import(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	s := jwk.NewSet()
	if err := s.AddKey(key); err != nil {
		t.Fatal(err)
	}
	return s
}

// withAuthIssuer trusts authIssuerID: publisher tokens signed with
// authPubKey, subscriber tokens with authSubKey.
func withAuthIssuer(t testing.TB) mercure.Option {
	return mercure.WithIssuer(mercure.Issuer{
		ID:             authIssuerID,
		PublisherKeys:  authKeySet(t, authPubKey),
		SubscriberKeys: authKeySet(t, authSubKey),
	})
}

// startAuthHub starts a hub that validates tokens (no insecure publishing).
func startAuthHub(t testing.TB, opts ...mercure.Option) *testHub {
	t.Helper()
	return startHub(t, nil, append([]mercure.Option{withAuthIssuer(t)}, opts...)...)
}

func exactTopic(m string) map[string]any { return map[string]any{"match": m} }
func patternTopic(m string) map[string]any {
	return map[string]any{"match": m, "match_type": "urlpattern"}
}

// detail is a Mercure authorization detail; actions are comma-separated.
func detail(actions string, topics ...map[string]any) map[string]any {
	ts := make([]any, len(topics))
	for i, tp := range topics {
		ts[i] = tp
	}
	as := []any{}
	for a := range strings.SplitSeq(actions, ",") {
		as = append(as, a)
	}
	return map[string]any{"type": authDetailType, "actions": as, "topics": ts}
}

// authClaims are valid claims (one hour left) with the given details.
func authClaims(details ...map[string]any) map[string]any {
	ds := make([]any, len(details))
	for i, d := range details {
		ds[i] = d
	}
	now := time.Now()
	return map[string]any{
		"iss":                   authIssuerID,
		"aud":                   testHubURL,
		"sub":                   "user-1",
		"client_id":             "client-1",
		"iat":                   now.Unix(),
		"exp":                   now.Add(time.Hour).Unix(),
		"jti":                   fmt.Sprintf("jti-%d", authJTI.Add(1)),
		"authorization_details": ds,
	}
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// mintToken signs claims as ES256 with key under header hdr (nil: the
// standard at+jwt header).
func mintToken(t testing.TB, key *ecdsa.PrivateKey, hdr, claims map[string]any) string {
	t.Helper()
	if hdr == nil {
		hdr = map[string]any{"alg": "ES256", "typ": "at+jwt"}
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := b64url(h) + "." + b64url(c)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64url(sig)
}

func pubToken(t testing.TB, details ...map[string]any) string {
	return mintToken(t, authPubKey, nil, authClaims(details...))
}

func subToken(t testing.TB, details ...map[string]any) string {
	return mintToken(t, authSubKey, nil, authClaims(details...))
}

// request sends a request to the hub endpoint (plus rawQuery) with header
// pairs; a non-empty body is sent as a form.
func (th *testHub) request(method, rawQuery, body string, header ...string) (int, string, http.Header) {
	th.t.Helper()
	return doWith(th.t, th.httpClient(), th.newRequest(context.Background(), method, rawQuery, body, header...))
}

// publishMarker publishes a public update through the Go API and returns
// its data, so that a stream can prove nothing came before it.
func publishMarker(t testing.TB, th *testHub, topic string) string {
	t.Helper()
	data := fmt.Sprintf("marker-%d", authJTI.Add(1))
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{topic}, Data: data}); err != nil {
		t.Fatal(err)
	}
	return data
}

func goPublish(t testing.TB, th *testHub, u mercure.Update) {
	t.Helper()
	if _, err := th.Publish(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

func expectData(t testing.TB, s *subscription, want string) {
	t.Helper()
	if ev := s.next(t); ev.Data != want {
		t.Fatalf("next event data = %q, want %q", ev.Data, want)
	}
}

func form(pairs ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		v.Add(pairs[i], pairs[i+1])
	}
	return v.Encode()
}

// TestAUTH13_14_16_17_PublishChallenges covers the publish endpoint of a
// hub that validates tokens: status codes and Bearer challenges, and that
// only granted updates are dispatched (AUTH-30, AUTH-34).
func TestAUTH13_14_16_17_PublishChallenges(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	s := th.subscribe("match=*", "Authorization", "Bearer "+subToken(t, detail("subscribe", exactTopic("*"))))

	const topic = "https://example.com/books/1"
	grantTopic := detail("publish", exactTopic(topic))
	valid := pubToken(t, grantTopic)

	mut := func(f func(c map[string]any)) string {
		c := authClaims(grantTopic)
		f(c)
		return mintToken(t, authPubKey, nil, c)
	}
	typ := func(v string) string {
		return mintToken(t, authPubKey, map[string]any{"alg": "ES256", "typ": v}, authClaims(grantTopic))
	}

	cases := []struct {
		name      string
		query     string
		extra     []string // extra form pairs
		topics    []string // default: {topic}
		header    []string
		status    int
		challenge string
	}{
		{name: "no token", status: 401, challenge: challengeNone},
		{name: "expired", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["iat"] = time.Now().Add(-2 * time.Hour).Unix()
			c["exp"] = time.Now().Add(-time.Hour).Unix()
		})}, status: 401, challenge: challengeInvalidToken},
		{name: "wrong aud", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["aud"] = "https://example.com/.well-known/other"
		})}, status: 401, challenge: challengeInvalidToken},
		{name: "aud array with hub", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["aud"] = []any{"https://api.example.com", testHubURL}
		})}, status: 200},
		{name: "typ JWT", header: []string{"Authorization", "Bearer " + typ("JWT")}, status: 401, challenge: challengeInvalidToken},
		{name: "typ application/at+jwt", header: []string{"Authorization", "Bearer " + typ("application/AT+JWT")}, status: 200},
		{name: "unknown issuer", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["iss"] = "https://unknown.example.com"
		})}, status: 401, challenge: challengeInvalidToken},
		{name: "signed by subscriber key", header: []string{"Authorization", "Bearer " + mintToken(t, authSubKey, nil, authClaims(grantTopic))}, status: 401, challenge: challengeInvalidToken},
		{name: "signed by unknown key", header: []string{"Authorization", "Bearer " + mintToken(t, authOtherKey, nil, authClaims(grantTopic))}, status: 401, challenge: challengeInvalidToken},
		{name: "garbage", header: []string{"Authorization", "Bearer not.a.jwt"}, status: 401, challenge: challengeInvalidToken},
		{name: "malformed details", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["authorization_details"] = []any{grantTopic, detail("publish", patternTopic("https://example.com/{"))}
		})}, status: 401, challenge: challengeInvalidToken},
		{name: "alg none", header: []string{"Authorization", "Bearer " + unsigned(map[string]any{"alg": "none", "typ": "at+jwt"}, authClaims(grantTopic))}, status: 401, challenge: challengeInvalidToken},
		{name: "alg HS512 header on an EC-signed token", header: []string{"Authorization", "Bearer " + mintToken(t, authPubKey, map[string]any{"alg": "HS512", "typ": "at+jwt"}, authClaims(grantTopic))}, status: 401, challenge: challengeInvalidToken},
		{name: "embedded jwk header", header: []string{"Authorization", "Bearer " + mintToken(t, authOtherKey, map[string]any{"alg": "ES256", "typ": "at+jwt", "jwk": publicJWK(t, authOtherKey)}, authClaims(grantTopic))}, status: 401, challenge: challengeInvalidToken},
		{name: "crit header", header: []string{"Authorization", "Bearer " + mintToken(t, authPubKey, map[string]any{"alg": "ES256", "typ": "at+jwt", "crit": []string{"exp"}}, authClaims(grantTopic))}, status: 401, challenge: challengeInvalidToken},
		{name: "nbf in the future", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["nbf"] = time.Now().Add(time.Hour).Unix()
		})}, status: 401, challenge: challengeInvalidToken},
		{name: "no exp", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) { delete(c, "exp") })}, status: 401, challenge: challengeInvalidToken},
		{name: "exp 0", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) { c["exp"] = 0 })}, status: 401, challenge: challengeInvalidToken},
		{name: "no aud", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) { delete(c, "aud") })}, status: 401, challenge: challengeInvalidToken},
		{name: "iss differs by case", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) { c["iss"] = strings.ToUpper(authIssuerID) })}, status: 401, challenge: challengeInvalidToken},
		{name: "details not an array", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) { c["authorization_details"] = grantTopic })}, status: 401, challenge: challengeInvalidToken},
		{name: "unsupported match_type", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["authorization_details"] = []any{grantTopic, detail("publish", map[string]any{"match": "x", "match_type": "regex"})}
		})}, status: 401, challenge: challengeInvalidToken},
		{name: "non-string action", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["authorization_details"] = []any{map[string]any{"type": authDetailType, "actions": []any{"publish", 1}, "topics": []any{exactTopic(topic)}}}
		})}, status: 401, challenge: challengeInvalidToken},
		{name: "payload not an object", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["authorization_details"] = []any{map[string]any{"type": authDetailType, "actions": []any{"publish"}, "topics": []any{exactTopic(topic)}, "payload": "x"}}
		})}, status: 401, challenge: challengeInvalidToken},
		{name: "unknown action ignored", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["authorization_details"] = []any{map[string]any{"type": authDetailType, "actions": []any{"publish", "delete"}, "topics": []any{exactTopic(topic)}}}
		})}, status: 200},
		{name: "foreign detail ignored", header: []string{"Authorization", "Bearer " + mut(func(c map[string]any) {
			c["authorization_details"] = []any{map[string]any{"type": "https://other.example/detail", "weird": true}, grantTopic}
		})}, status: 200},
		{name: "Basic scheme", header: []string{"Authorization", "Basic x"}, status: 400, challenge: challengeInvalidReq},
		{name: "Bearer without token", header: []string{"Authorization", "Bearer"}, status: 400, challenge: challengeInvalidReq},
		{name: "Bearer two spaces", header: []string{"Authorization", "Bearer  " + valid}, status: 400, challenge: challengeInvalidReq},
		{name: "scheme case-insensitive", header: []string{"Authorization", "bEARER " + valid}, status: 200},
		{name: "subscribe only", header: []string{"Authorization", "Bearer " + pubToken(t, detail("subscribe", exactTopic(topic)))}, status: 403, challenge: challengeScope},
		{name: "other topic", header: []string{"Authorization", "Bearer " + pubToken(t, detail("publish", exactTopic("https://example.com/books/2")))}, status: 403, challenge: challengeScope},
		{name: "no mercure detail", header: []string{"Authorization", "Bearer " + pubToken(t)}, status: 403, challenge: challengeScope},
		{name: "AUTH-34 one alternate not granted", topics: []string{topic, "https://example.com/authors/1"}, header: []string{"Authorization", "Bearer " + valid}, status: 403, challenge: challengeScope},
		{name: "AUTH-34 canonical not granted", topics: []string{"https://example.com/authors/1", topic}, header: []string{"Authorization", "Bearer " + valid}, status: 403, challenge: challengeScope},
		{name: "AUTH-34 all granted", topics: []string{topic, "https://example.com/authors/1"}, header: []string{"Authorization", "Bearer " + pubToken(t, detail("publish", exactTopic(topic)), detail("publish", exactTopic("https://example.com/authors/1")))}, status: 200},
		{name: "exact grant", header: []string{"Authorization", "Bearer " + valid}, status: 200},
		{name: "urlpattern grant", header: []string{"Authorization", "Bearer " + pubToken(t, detail("publish", patternTopic("https://example.com/books/:id")))}, status: 200},
		{name: "relative urlpattern grant", header: []string{"Authorization", "Bearer " + pubToken(t, detail("publish", patternTopic("/books/*")))}, status: 200},
		{name: "wildcard grant", header: []string{"Authorization", "Bearer " + pubToken(t, detail("publish", exactTopic("*")))}, status: 200},
		{name: "wildcard urlpattern grant", header: []string{"Authorization", "Bearer " + pubToken(t, detail("publish", patternTopic("*")))}, status: 200},
		{name: "publish and unknown action", header: []string{"Authorization", "Bearer " + pubToken(t, detail("frobnicate,publish", exactTopic(topic)))}, status: 200},
		{name: "AUTH-9 access_token in form", extra: []string{"access_token", valid}, status: 401, challenge: challengeNone},
		{name: "AUTH-9 access_token in query", query: "access_token=" + url.QueryEscape(valid), status: 401, challenge: challengeNone},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := fmt.Sprintf("case-%d", i)
			topics := c.topics
			if topics == nil {
				topics = []string{topic}
			}
			var pairs []string
			for _, tp := range topics {
				pairs = append(pairs, "topic", tp)
			}
			pairs = append(pairs, "data", data)
			pairs = append(pairs, c.extra...)
			status, body, hdr := th.request(http.MethodPost, c.query, form(pairs...), c.header...)
			if status != c.status {
				t.Fatalf("status = %d, want %d (body %q)", status, c.status, body)
			}
			if got := bareChallenge(hdr.Get("WWW-Authenticate")); got != c.challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, c.challenge)
			}
			if status == http.StatusOK {
				expectData(t, s, data)
				return
			}
			if strings.Contains(body, "invalid_token") || strings.Contains(body, "insufficient_scope") || strings.Contains(body, "invalid_request") {
				t.Errorf("OAuth error code repeated in body (AUTH-17): %q", body)
			}
			// Nothing was dispatched: the next event is the marker.
			expectData(t, s, publishMarker(t, th, topic))
		})
	}
}

// TestAUTH2_SubscribeNeedsTokenByDefault: without WithAnonymousSubscribers
// a hub with issuers refuses streams without a token (AUTH-2, AUTH-13).
func TestAUTH2_SubscribeNeedsTokenByDefault(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	s, res := th.trySubscribe(http.MethodGet, "match=*", "")
	if s != nil {
		t.Fatal("anonymous stream accepted")
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status = %d, want 401", res.StatusCode)
	}
	if got := res.Header.Get("WWW-Authenticate"); got != challengeNone {
		t.Errorf("WWW-Authenticate = %q, want %q", got, challengeNone)
	}
}

// TestAUTH2_AnonymousSubscribersGetPublicUpdatesOnly (AUTH-2, AUTH-35,
// AUTH-36).
func TestAUTH2_AnonymousSubscribersGetPublicUpdatesOnly(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithAnonymousSubscribers())
	const topic = "https://example.com/books/1"
	anon := th.subscribe("match=*")
	// A valid token without any subscribe grant is no reason to refuse.
	noGrant := th.subscribe("match=*", "Authorization", "Bearer "+subToken(t, detail("publish", exactTopic("*"))))
	goPublish(t, th, mercure.Update{Topics: []string{topic}, Data: "private", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{topic}, Data: "public"})
	expectData(t, anon, "public")
	expectData(t, noGrant, "public")
}

// TestAUTH35_GrantTopicDiffersFromRoutingTopic is the AUTH-35 example.
func TestAUTH35_GrantTopicDiffersFromRoutingTopic(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithAnonymousSubscribers())
	tok := subToken(t, detail("subscribe", patternTopic("https://example.com/teams/7/*")))
	const q = "match_urlpattern=" + "https://example.com/orders/:id"
	s := th.subscribe(q, "Authorization", "Bearer "+tok)
	anon := th.subscribe(q)

	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/orders/100"}, Data: "order-100", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/orders/99", "https://example.com/teams/7/orders/99"}, Data: "order-99", Private: true})
	// Granted but not routed: the grant never adds topics (AUTH-8).
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/teams/7/orders/98"}, Data: "team-only", Private: true})
	marker := publishMarker(t, th, "https://example.com/orders/1")

	expectData(t, s, "order-99")
	expectData(t, s, marker)
	expectData(t, anon, marker)
}

// TestAUTH10_HeaderBeatsCookie: the Authorization header, when present, is
// the only credential (AUTH-10); the cookie is used otherwise (AUTH-12).
func TestAUTH10_HeaderBeatsCookie(t *testing.T) {
	t.Parallel()
	const topic = "https://example.com/books/1"
	grant := detail("subscribe", exactTopic(topic))
	valid := subToken(t, grant)
	cookie := func(name, v string) string { return name + "=" + v }
	expired := func() string {
		c := authClaims(grant)
		c["iat"] = time.Now().Add(-2 * time.Hour).Unix()
		c["exp"] = time.Now().Add(-time.Hour).Unix()
		return mintToken(t, authSubKey, nil, c)
	}()

	cases := []struct {
		name      string
		opts      []mercure.Option
		header    []string
		status    int
		challenge string
	}{
		{name: "valid header, invalid cookie", header: []string{"Authorization", "Bearer " + valid, "Cookie", cookie(mercure.DefaultCookieName, "garbage")}, status: 200},
		{name: "invalid header, valid cookie", header: []string{"Authorization", "Bearer garbage", "Cookie", cookie(mercure.DefaultCookieName, valid)}, status: 401, challenge: challengeInvalidToken},
		{name: "malformed header, valid cookie", header: []string{"Authorization", "Basic x", "Cookie", cookie(mercure.DefaultCookieName, valid)}, status: 400, challenge: challengeInvalidReq},
		{name: "default cookie only", header: []string{"Cookie", cookie(mercure.DefaultCookieName, valid)}, status: 200},
		{name: "custom cookie only", opts: []mercure.Option{mercure.WithCookieName("hub_a_token")}, header: []string{"Cookie", "other=1; " + cookie("hub_a_token", valid)}, status: 200},
		{name: "default cookie ignored under a custom name", opts: []mercure.Option{mercure.WithCookieName("hub_a_token")}, header: []string{"Cookie", cookie(mercure.DefaultCookieName, valid)}, status: 401, challenge: challengeNone},
		{name: "expired cookie", header: []string{"Cookie", cookie(mercure.DefaultCookieName, expired)}, status: 401, challenge: challengeInvalidToken},
		{name: "expired cookie, anonymous allowed", opts: []mercure.Option{mercure.WithAnonymousSubscribers()}, header: []string{"Cookie", cookie(mercure.DefaultCookieName, expired)}, status: 401, challenge: challengeInvalidToken},
		{name: "invalid header, anonymous allowed", opts: []mercure.Option{mercure.WithAnonymousSubscribers()}, header: []string{"Authorization", "Bearer garbage"}, status: 401, challenge: challengeInvalidToken},
		{name: "publisher token in cookie", header: []string{"Cookie", cookie(mercure.DefaultCookieName, mintToken(t, authPubKey, nil, authClaims(grant)))}, status: 401, challenge: challengeInvalidToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := startAuthHub(t, c.opts...)
			s, res := th.trySubscribe(http.MethodGet, "match="+url.QueryEscape(topic), "", c.header...)
			if s == nil {
				res.Body.Close()
				if res.StatusCode != c.status {
					t.Fatalf("status = %d, want %d", res.StatusCode, c.status)
				}
				if got := bareChallenge(res.Header.Get("WWW-Authenticate")); got != c.challenge {
					t.Errorf("WWW-Authenticate = %q, want %q", got, c.challenge)
				}
				return
			}
			if c.status != http.StatusOK {
				t.Fatalf("status = 200, want %d", c.status)
			}
			goPublish(t, th, mercure.Update{Topics: []string{topic}, Data: "private", Private: true})
			expectData(t, s, "private")
		})
	}
}

// TestREC5_ReplayUsesCurrentToken: private events in history are replayed
// only to streams whose current token grants them (REC-5, SEC-8).
func TestREC5_ReplayUsesCurrentToken(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithAnonymousSubscribers())
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/start"}, ID: "start", Data: "start"})
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/books/1"}, ID: "p1", Data: "p1", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/books/2"}, ID: "p2", Data: "p2", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/books/3"}, ID: "pub", Data: "pub"})

	cases := []struct {
		name   string
		header []string
		want   []string
	}{
		{"books/1 only", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", exactTopic("https://example.com/books/1")))}, []string{"p1", "pub"}},
		{"books/2 by pattern", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", patternTopic("/books/2")))}, []string{"p2", "pub"}},
		{"everything", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", exactTopic("*")))}, []string{"p1", "p2", "pub"}},
		{"publish grant only", []string{"Authorization", "Bearer " + subToken(t, detail("publish", exactTopic("*")))}, []string{"pub"}},
		{"anonymous", nil, []string{"pub"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each subtest has its own marker topic: earlier markers are
			// in history too.
			markerTopic := fmt.Sprintf("https://example.com/marker/%d", i)
			s := th.subscribe("match_urlpattern=/books/:id&match="+url.QueryEscape(markerTopic)+"&last_event_id=start", c.header...)
			for _, w := range c.want {
				expectData(t, s, w)
			}
			// Nothing else was replayed: the next event is a live marker.
			expectData(t, s, publishMarker(t, th, markerTopic))
		})
	}
}

// TestAUTH37_StreamEndsAtTokenExpiry: a stream opened with a token ends
// at the token's exp, header or cookie. The test runs in a synctest
// bubble: it looks at the stream just before exp and at exp, on the
// bubble's clock.
func TestAUTH37_StreamEndsAtTokenExpiry(t *testing.T) {
	for _, via := range []string{"header", "cookie"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				th := startBubbleHub(t, nil, withAuthIssuer(t))
				c := authClaims(detail("subscribe", exactTopic("*")))
				exp := time.Now().Add(2 * time.Second).Truncate(time.Second)
				c["exp"] = exp.Unix()
				tok := mintToken(t, authSubKey, nil, c)
				hdr := []string{"Authorization", "Bearer " + tok}
				if via == "cookie" {
					hdr = []string{"Cookie", mercure.DefaultCookieName + "=" + tok}
				}
				s := th.subscribe("match=*", hdr...)
				// The stream is live until then.
				expectData(t, s, publishMarker(t, th, "https://example.com/a"))
				time.Sleep(time.Until(exp) - time.Nanosecond)
				synctest.Wait()
				select {
				case <-s.done:
					t.Fatal("the stream ended before its token's exp")
				default:
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				select {
				case <-s.done:
				default:
					t.Fatal("the stream is still open at its token's exp")
				}
			})
		})
	}
}

// TestAUTH37_TokenWithinLeewayEndsAtOnce: a token whose exp has passed but
// that is still within the verifier's leeway must not keep a stream open.
func TestAUTH37_TokenWithinLeewayEndsAtOnce(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	c := authClaims(detail("subscribe", exactTopic("*")))
	c["exp"] = time.Now().Add(-2 * time.Second).Unix()
	s, res := th.trySubscribe(http.MethodGet, "match=*", "", "Authorization", "Bearer "+mintToken(t, authSubKey, nil, c))
	if s == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status = %d, want 200 or 401", res.StatusCode)
		}
		return
	}
	select {
	case <-s.done:
	case <-time.After(testwait.Deadline):
		t.Fatal("a stream with an expired token stayed open")
	}
}

// TestSEC4_CookiePublishNeedsSameOrigin: cookie-authenticated publishes
// must come from the hub's origin (SEC-4).
func TestSEC4_CookiePublishNeedsSameOrigin(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	const topic = "https://example.com/books/1"
	tok := pubToken(t, detail("publish", exactTopic(topic)))
	s := th.subscribe("match=*", "Authorization", "Bearer "+subToken(t, detail("subscribe", exactTopic("*"))))
	ck := mercure.DefaultCookieName + "=" + tok

	cases := []struct {
		name   string
		header []string
		status int
	}{
		{"same Origin", []string{"Cookie", ck, "Origin", "https://example.com"}, 200},
		{"cross Origin", []string{"Cookie", ck, "Origin", "https://evil.example"}, 403},
		{"null Origin", []string{"Cookie", ck, "Origin", "null"}, 403},
		{"cross Origin, same Referer", []string{"Cookie", ck, "Origin", "https://evil.example", "Referer", "https://example.com/page"}, 403},
		{"neither", []string{"Cookie", ck}, 403},
		{"same Referer", []string{"Cookie", ck, "Referer", "https://example.com/page"}, 200},
		{"cross Referer", []string{"Cookie", ck, "Referer", "https://example.com.evil.example/page"}, 403},
		{"other port", []string{"Cookie", ck, "Origin", "https://example.com:8443"}, 403},
		{"http scheme", []string{"Cookie", ck, "Origin", "http://example.com"}, 403},
		{"header token, cross Origin", []string{"Authorization", "Bearer " + tok, "Origin", "https://evil.example"}, 200},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := fmt.Sprintf("sec4-%d", i)
			status, body, hdr := th.request(http.MethodPost, "", form("topic", topic, "data", data), c.header...)
			if status != c.status {
				t.Fatalf("status = %d, want %d (%s)", status, c.status, body)
			}
			if status == http.StatusOK {
				expectData(t, s, data)
				return
			}
			if got := hdr.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("403 without a Bearer challenge (AUTH-17): %q", got)
			}
			expectData(t, s, publishMarker(t, th, topic))
		})
	}
}

// TestSEC4_ForbiddenChallengeHasResourceMetadata: AUTH-17/DIS-8 say every
// challenge should carry resource_metadata, the SEC-4 refusal included.
func TestSEC4_ForbiddenChallengeHasResourceMetadata(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	tok := pubToken(t, detail("publish", exactTopic("*")))
	status, _, hdr := th.request(http.MethodPost, "", form("topic", "https://example.com/a", "data", "x"),
		"Cookie", mercure.DefaultCookieName+"="+tok, "Origin", "https://evil.example")
	if status != http.StatusForbidden {
		t.Fatalf("status = %d, want 403", status)
	}
	if got := hdr.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") || !strings.Contains(got, authMetadata) {
		t.Errorf("WWW-Authenticate = %q, want a Bearer challenge with %s", got, authMetadata)
	}
}

// TestDIS5_MetadataURL (DIS-5).
func TestDIS5_MetadataURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ hub, url, path string }{
		{"https://example.com/.well-known/mercure", "https://example.com/.well-known/oauth-protected-resource/.well-known/mercure", "/.well-known/oauth-protected-resource/.well-known/mercure"},
		{"https://example.com/app/hub", "https://example.com/.well-known/oauth-protected-resource/app/hub", "/.well-known/oauth-protected-resource/app/hub"},
	} {
		h, err := mercure.New(c.hub, withAuthIssuer(t))
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.url, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("%s: GET %s: %d, want 200", c.hub, c.url, rec.Code)
		}
		if got := h.MetadataPath(); got != c.path {
			t.Errorf("%s: MetadataPath = %q, want %q", c.hub, got, c.path)
		}
		if err := h.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestDIS8_ChallengeNamesMetadataURL: the challenge of a hub with a path
// prefix points to its own metadata document.
func TestDIS8_ChallengeNamesMetadataURL(t *testing.T) {
	t.Parallel()
	th := startHubAt(t, "https://example.com/app/hub", nil, withAuthIssuer(t))
	status, _, hdr := th.request(http.MethodPost, "", form("topic", "https://example.com/a", "data", "x"))
	want := `Bearer resource_metadata="https://example.com/.well-known/oauth-protected-resource/app/hub"`
	if status != http.StatusUnauthorized || bareChallenge(hdr.Get("WWW-Authenticate")) != want {
		t.Errorf("got %d %q, want 401 %q", status, hdr.Get("WWW-Authenticate"), want)
	}
}

// TestDIS6_7_MetadataDocument (DIS-5 to DIS-7).
func TestDIS6_7_MetadataDocument(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		hub, cookie string
		opts        []mercure.Option
	}{
		{"https://example.com/.well-known/mercure", mercure.DefaultCookieName, nil},
		{"https://example.com/app/hub", "hub_a_token", []mercure.Option{mercure.WithCookieName("hub_a_token")}},
	} {
		h, err := mercure.New(c.hub, append([]mercure.Option{withAuthIssuer(t)}, c.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, h.MetadataPath(), nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status = %d", c.hub, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type = %q", c.hub, ct)
		}
		var doc struct {
			Resource      string   `json:"resource"`
			DetailTypes   []string `json:"authorization_details_types_supported"`
			BearerMethods []string `json:"bearer_methods_supported"`
			Cookie        string   `json:"mercure_cookie"`
			AuthServers   []string `json:"authorization_servers"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%s: %v: %s", c.hub, err, rec.Body)
		}
		if doc.Resource != c.hub {
			t.Errorf("resource = %q, want %q", doc.Resource, c.hub)
		}
		if !slices.Equal(doc.DetailTypes, []string{authDetailType}) {
			t.Errorf("authorization_details_types_supported = %q", doc.DetailTypes)
		}
		if !slices.Equal(doc.BearerMethods, []string{"header"}) {
			t.Errorf("bearer_methods_supported = %q", doc.BearerMethods)
		}
		if doc.Cookie != c.cookie {
			t.Errorf("mercure_cookie = %q, want %q", doc.Cookie, c.cookie)
		}
	}
}

// TestDIS5_MetadataWithoutIssuers: a hub that verifies no token still
// serves its metadata, which says so (no bearer method, no detail type,
// no cookie), rather than a 404 that clients may take for a pre-standard
// hub (spec §Discovery: Protected Resource Metadata, DIS-10).
func TestDIS5_MetadataWithoutIssuers(t *testing.T) {
	t.Parallel()
	const base = `{"resource":"` + testHubURL + `","bearer_methods_supported":[],"mercure_matcher_types_supported":["exact","urlpattern"]`
	noSession := func(*http.Request) (*mercure.Access, error) { return nil, nil }
	for _, c := range []struct {
		name string
		opts []mercure.Option
		want string
	}{
		{"no authorization", nil, base + "}"},
		{"anonymous subscribers", []mercure.Option{mercure.WithAnonymousSubscribers()}, base + "}"},
		{"an Authorizer and the subscriptions API", []mercure.Option{mercure.WithAuthorizer(noSession, time.Minute), mercure.WithSubscriptions()},
			base + `,"mercure_subscriptions":true}`},
	} {
		h, err := mercure.New(testHubURL, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, h.MetadataPath(), nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != c.want {
			t.Errorf("%s: %d %s %s, want 200 application/json %s", c.name, rec.Code, rec.Header().Get("Content-Type"), rec.Body, c.want)
		}
	}
}

// TestAUTH35_FanOutSharedGrants: many streams sharing one grant set each
// get a granted private update exactly once, and streams with another set
// never get it.
func TestAUTH35_FanOutSharedGrants(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	const granted, others = 200, 20
	grant := detail("subscribe", patternTopic("https://example.com/books/:id"))
	var yes, no []*subscription
	for range granted {
		// Distinct tokens (jti, iat) with identical grants.
		yes = append(yes, th.subscribe("match=*", "Authorization", "Bearer "+subToken(t, grant)))
	}
	otherTok := subToken(t, detail("subscribe", exactTopic("https://example.com/authors/1")))
	for range others {
		no = append(no, th.subscribe("match=*", "Authorization", "Bearer "+otherTok))
	}
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/books/1"}, Data: "book", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/magazines/1"}, Data: "magazine", Private: true})
	goPublish(t, th, mercure.Update{Topics: []string{"https://example.com/books/2"}, Data: "book2", Private: true})
	marker := publishMarker(t, th, "https://example.com/marker")
	for i, s := range yes {
		for _, w := range []string{"book", "book2", marker} {
			if ev := s.next(t); ev.Data != w {
				t.Fatalf("granted stream %d: got %q, want %q", i, ev.Data, w)
			}
		}
	}
	for i, s := range no {
		if ev := s.next(t); ev.Data != marker {
			t.Fatalf("other stream %d: got %q, want the marker", i, ev.Data)
		}
	}
}

// TestSEC4_HubURLWithDefaultPort: browsers serialize an origin without its
// default port, so a hub configured as https://example.com:443/... must
// still accept a cookie publish with Origin https://example.com.
func TestSEC4_HubURLWithDefaultPort(t *testing.T) {
	t.Parallel()
	th := startHubAt(t, "https://example.com:443/.well-known/mercure", nil, withAuthIssuer(t))
	c := authClaims(detail("publish", exactTopic("*")))
	c["aud"] = "https://example.com:443/.well-known/mercure"
	tok := mintToken(t, authPubKey, nil, c)
	status, body, _ := th.request(http.MethodPost, "", form("topic", "https://example.com/a", "data", "x"),
		"Cookie", mercure.DefaultCookieName+"="+tok, "Origin", "https://example.com")
	if status != http.StatusOK {
		t.Errorf("status = %d, want 200 (%s)", status, body)
	}
}

// TestAUTH16_SeveralAuthorizationHeaders: two Authorization headers are a
// malformed credential, never two tries.
func TestAUTH16_SeveralAuthorizationHeaders(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	valid := "Bearer " + subToken(t, detail("subscribe", exactTopic("*")))
	req, err := http.NewRequest(http.MethodGet, th.endpoint()+"?match=*", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Add("Authorization", valid)
	req.Header.Add("Authorization", valid)
	status, _, hdr := do(t, req)
	if status != http.StatusBadRequest || bareChallenge(hdr.Get("WWW-Authenticate")) != challengeInvalidReq {
		t.Errorf("got %d %q, want 400 %q", status, hdr.Get("WWW-Authenticate"), challengeInvalidReq)
	}
}

// unsigned builds an unsecured JWS (alg none): header.payload. with an
// empty signature.
func unsigned(hdr, claims map[string]any) string {
	h, _ := json.Marshal(hdr)
	c, _ := json.Marshal(claims)
	return b64url(h) + "." + b64url(c) + "."
}

// publicJWK is k's public key as a JWK object, for an attacker's jwk header.
func publicJWK(t testing.TB, k *ecdsa.PrivateKey) map[string]any {
	t.Helper()
	key, err := jwk.Import(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
