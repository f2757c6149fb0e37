package mercure_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/mercurekit/mercure"
)

// playgroundToken asks th's playground for a token, as its page does.
func playgroundToken(t *testing.T, th *testHub) string {
	t.Helper()
	req := mustRequest(t, http.MethodPost, th.srv.URL+debugPath+"token", "")
	req.Host = "example.com" // the hub URL's
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	status, body, hdr := do(t, req)
	var doc struct {
		Token     string `json:"token"`
		ExpiresIn int    `json:"expires_in"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc.Token == "" {
		t.Fatalf("POST token: %d %s", status, body)
	}
	if hdr.Get("Cache-Control") != "no-store" || doc.ExpiresIn != 600 {
		t.Errorf("token answer: Cache-Control %q, expires_in %d; want no-store and 600", hdr.Get("Cache-Control"), doc.ExpiresIn)
	}
	return doc.Token
}

// The playground's token publishes and subscribes to everything, private
// updates, the subscriptions API and the activity included; it lives ten
// minutes.
func TestPlayground_TokenGrantsEverything(t *testing.T) {
	t.Parallel()
	th := startMountedHub(t, mercure.WithInsecurePlayground(), mercure.WithSubscriptions(), mercure.WithLogger(nil))
	tok := playgroundToken(t, th)
	parsed, err := jwt.ParseInsecure([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	iat, _ := parsed.IssuedAt()
	exp, _ := parsed.Expiration()
	if aud, _ := parsed.Audience(); exp.Sub(iat) != 10*time.Minute || len(aud) != 1 || aud[0] != testHubURL {
		t.Errorf("token for %v, living %v; want %s, 10m", aud, exp.Sub(iat), testHubURL)
	}
	bearer := []string{"Authorization", "Bearer " + tok}
	s := th.subscribe("match=*", bearer...)
	status, id, _ := th.request(http.MethodPost, "", "private=on&topic="+url.QueryEscape("https://example.com/secret"), bearer...)
	if status != http.StatusOK {
		t.Fatalf("private publish with the playground's token: %d %s", status, id)
	}
	for {
		if ev := s.next(t); ev.ID == id {
			break
		} // the subscription events come first
	}
	for _, p := range []string{"/.well-known/mercure/subscriptions", debugPath + "activity"} {
		req := mustRequest(t, http.MethodGet, th.srv.URL+p, "")
		req.Header.Set(bearer[0], bearer[1])
		if status, body, _ := do(t, req); status != http.StatusOK {
			t.Errorf("GET %s with the playground's token: %d %s", p, status, body)
		}
	}
}

// The playground hands tokens out to POSTs for the hub URL's own host and,
// from browsers, its own origin; it is not there without its option.
func TestPlayground_TokenRefusals(t *testing.T) {
	t.Parallel()
	th := startMountedHub(t, mercure.WithInsecurePlayground(), mercure.WithLogger(nil))
	plain := startMountedHub(t, mercure.WithDebugger(), mercure.WithLogger(nil))
	cases := []struct {
		name         string
		hub          *testHub
		method, host string
		site         string
		want         int
		detail       string
	}{
		{"curl", th, http.MethodPost, "example.com", "", 200, ""},
		{"the page", th, http.MethodPost, "example.com", "same-origin", 200, ""},
		{"host with the default port", th, http.MethodPost, "example.com:443", "", 200, ""},
		{"GET", th, http.MethodGet, "example.com", "same-origin", 405, "method not allowed"},
		{"another host (DNS rebinding)", th, http.MethodPost, "attacker.example", "same-origin", 403, `not \"attacker.example\"`},
		{"another port", th, http.MethodPost, "example.com:8443", "", 403, "hub URL's host"},
		{"another site's page", th, http.MethodPost, "example.com", "cross-site", 403, "own origin"},
		{"a sibling site's page", th, http.MethodPost, "example.com", "same-site", 403, "own origin"},
		{"WithDebugger alone", plain, http.MethodPost, "example.com", "same-origin", 404, "no such page"},
	}
	for _, c := range cases {
		req := mustRequest(t, c.method, c.hub.srv.URL+debugPath+"token", "")
		req.Host = c.host
		if c.site != "" {
			req.Header.Set("Sec-Fetch-Site", c.site)
		}
		status, body, _ := do(t, req)
		if status != c.want || !strings.Contains(body, c.detail) {
			t.Errorf("%s: %d %s, want %d %q", c.name, status, body, c.want, c.detail)
		}
	}
}

// A playground token is valid on the hub that minted it only, even on
// another hub with the same URL and a playground of its own.
func TestPlayground_TokenIsThisHubsOnly(t *testing.T) {
	t.Parallel()
	a := startMountedHub(t, mercure.WithInsecurePlayground(), mercure.WithLogger(nil))
	b := startMountedHub(t, mercure.WithInsecurePlayground(), mercure.WithLogger(nil))
	tok := playgroundToken(t, a)
	status, body, hdr := b.request(http.MethodPost, "", "topic=x", "Authorization", "Bearer "+tok)
	if status != http.StatusUnauthorized || bareChallenge(hdr.Get("WWW-Authenticate")) != `Bearer error="invalid_token", `+authMetadata || !strings.Contains(body, "not an issuer this hub trusts") {
		t.Errorf("hub a's token on hub b: %d %q %s", status, hdr.Get("WWW-Authenticate"), body)
	}
}

// The playground is an issuer of the hub's: as with WithIssuer,
// subscribers without a token then need WithAnonymousSubscribers.
func TestPlayground_IsAnIssuer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		anonymous bool
		want      int
	}{{false, http.StatusUnauthorized}, {true, http.StatusOK}} {
		opts := []mercure.Option{mercure.WithInsecurePlayground(), mercure.WithLogger(nil)}
		if c.anonymous {
			opts = append(opts, mercure.WithAnonymousSubscribers())
		}
		th := startMountedHub(t, opts...)
		s, res := th.trySubscribe(http.MethodGet, "match=x", "")
		if res.StatusCode != c.want {
			t.Errorf("anonymous subscriber, WithAnonymousSubscribers %v: %d, want %d", c.anonymous, res.StatusCode, c.want)
		}
		if s != nil {
			s.close()
		}
	}
}

// The playground says at start that it is on, at Warn; the debugger alone
// does not. A token policy that leaves out the playground's algorithm is
// refused.
func TestPlayground_Options(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		opt  mercure.Option
		warn int
	}{{mercure.WithInsecurePlayground(), 1}, {mercure.WithDebugger(), 0}} {
		var logs logBuffer
		h, err := mercure.New(testHubURL, c.opt, mercure.WithLogger(logs.logger()))
		if err != nil {
			t.Fatal(err)
		}
		h.Shutdown(t.Context())
		if got := logs.count("level=WARN"); got != c.warn || logs.count("playground") != c.warn {
			t.Errorf("%d Warn lines, want %d:\n%s", got, c.warn, logs.text())
		}
	}
	_, err := mercure.New(testHubURL, mercure.WithInsecurePlayground(), mercure.WithTokenPolicy(mercure.TokenPolicy{Algorithms: []string{"ES256"}}))
	if !errors.Is(err, mercure.ErrInvalidOption) || !strings.Contains(err.Error(), "EdDSA") {
		t.Errorf("playground with ES256 only: %v, want ErrInvalidOption naming EdDSA", err)
	}
	h, err := mercure.New(testHubURL, mercure.WithInsecurePlayground(), mercure.WithLogger(nil),
		mercure.WithTokenPolicy(mercure.TokenPolicy{Algorithms: []string{"ES256", "EdDSA"}}))
	if err != nil {
		t.Fatalf("playground with ES256 and EdDSA: %v", err)
	}
	h.Shutdown(t.Context())
}
