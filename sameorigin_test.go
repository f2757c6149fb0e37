package mercure_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// A stream authorized by a cookie (the token cookie, or the session of
// WithAuthorizer) must come from the hub's origin or a WithCORS one, as a
// cookie-authenticated publish must (SEC-4): a cross-site page must not
// open a logged-in user's stream, which would announce their
// subscriptions and payload (issue 24). A same-origin EventSource sends
// no Origin but Sec-Fetch-Site: same-origin; older browsers a Referer.
// A request that names no origin at all is served: only a publish must
// name one (SEC-4). A token in the Authorization header is not ambient:
// no rule applies.
func TestSEC4_CookieSubscribeNeedsSameOrigin(t *testing.T) {
	t.Parallel()
	const (
		hubOrigin  = "https://example.com"
		corsOrigin = "https://app.example.org"
		evil       = "https://evil.example"
	)
	cases := []struct {
		name   string
		header []string
		want   int
	}{
		{"Origin, the hub's", []string{"Origin", hubOrigin}, 200},
		{"Origin, a WithCORS one", []string{"Origin", corsOrigin}, 200},
		{"Origin, another site", []string{"Origin", evil}, 403},
		{"Origin null", []string{"Origin", "null"}, 403},
		{"Origin, another site, Sec-Fetch-Site lying", []string{"Origin", evil, "Sec-Fetch-Site", "same-origin"}, 403},
		{"Sec-Fetch-Site same-origin", []string{"Sec-Fetch-Site", "same-origin"}, 200},
		{"Sec-Fetch-Site none (opened by the user)", []string{"Sec-Fetch-Site", "none"}, 200},
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"Sec-Fetch-Site cross-site, Referer elsewhere", []string{"Sec-Fetch-Site", "cross-site", "Referer", evil + "/page"}, 403},
		{"Sec-Fetch-Site same-site, Referer a WithCORS origin", []string{"Sec-Fetch-Site", "same-site", "Referer", corsOrigin + "/page"}, 200},
		{"Referer, the hub's", []string{"Referer", hubOrigin + "/books"}, 200},
		{"Referer elsewhere", []string{"Referer", evil + "/"}, 403},
		// Issue 41: a browser names the origin of a cross-origin
		// EventSource; a request that names none is a client with a
		// cookie jar, or a page whose referrer policy strips the
		// Referer in a browser without Fetch Metadata.
		{"none of them", nil, 200},
		{"Sec-Fetch-Site same-site alone", []string{"Sec-Fetch-Site", "same-site"}, 403},
		{"Sec-Fetch-Site unknown value", []string{"Sec-Fetch-Site", "bogus"}, 403},
	}
	sessions := newAppSessions()
	sessions.set("s1", &mercure.Access{Subject: "alice", Subscribe: []mercure.Match{{Pattern: "*"}}, Payload: map[string]any{"name": "Alice"}})
	tok := mintToken(t, authSubKey, nil, authClaims(detail("subscribe", exactTopic("*"))))
	sources := []struct {
		name   string
		hub    *testHub
		header []string // the credential
		rule   bool     // whether the origin rule applies
	}{
		{"session", startSessionHub(t, sessions, mercure.WithCORS(corsOrigin), mercure.WithSubscriptions()), cookie("s1"), true},
		{"token cookie", startAuthHub(t, mercure.WithCORS(corsOrigin), mercure.WithSubscriptions()), []string{"Cookie", mercure.DefaultCookieName + "=" + tok}, true},
		{"token header", startAuthHub(t, mercure.WithCORS(corsOrigin), mercure.WithSubscriptions()), []string{"Authorization", "Bearer " + tok}, false},
	}
	for _, src := range sources {
		for _, c := range cases {
			want := c.want
			if !src.rule {
				want = 200
			}
			status, body := openOnce(t, src.hub, append(append([]string(nil), src.header...), c.header...))
			if status != want {
				t.Errorf("%s, %s: %d, want %d (%s)", src.name, c.name, status, want, body)
				continue
			}
			if status == http.StatusForbidden {
				var doc struct{ Detail string }
				if json.Unmarshal([]byte(body), &doc) != nil || !strings.Contains(doc.Detail, "origin") {
					t.Errorf("%s, %s: the refusal does not say why: %s", src.name, c.name, body)
				}
			}
		}
		// Every accepted stream ended with its request: none stays listed.
		testwait.For(t, "the accepted streams to end", func() bool {
			subs, err := src.hub.Subscriptions(context.Background())
			return err == nil && len(subs) == 0
		})
	}
}

// openOnce opens a stream to th with header (name, value pairs, sent as
// they are) and returns its status, and the body of a refusal; an
// accepted stream is closed at once.
func openOnce(t *testing.T, th *testHub, header []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, th.endpoint()+"?match="+url.QueryEscape("https://example.com/a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		return res.StatusCode, ""
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode, string(b)
}
