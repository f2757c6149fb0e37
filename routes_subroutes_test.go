package mercure_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
)

// subscriberField finds a subscriber's id in the subscriptions API's JSON.
var subscriberField = regexp.MustCompile(`"subscriber":\s*"([^"]+)"`)

// Every sub-route, not only the subscriptions API's root and the
// debugger's page, answers only under the hub's own path (issue 24 item
// 3): the subscriptions API's resources, the debugger's files, its
// activity and the playground's token. Each is reached at its canonical
// path (so that the probe finds it) and at none of the paths that merely
// end the same way, with net/http's recipes: Mount, a catch-all, and
// the hub's paths registered behind StripPrefix. (The chi and gorilla recipes are in
// TestRouting_GuardedPaths.)
func TestRouting_EverySubRouteOnlyUnderTheHubPath(t *testing.T) {
	const underPrefix = "https://example.com/api/realtime/.well-known/mercure"
	recipes := []struct {
		name, hubURL string
		app          func(t *testing.T, h *mercure.Hub) http.Handler
	}{
		{"Mount", testHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
			m := http.NewServeMux()
			h.Mount(m)
			return m
		}},
		{"catch-all", testHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
			m := http.NewServeMux()
			m.Handle("/", h)
			return m
		}},
		{"Mount/prefix", underPrefix, func(t *testing.T, h *mercure.Hub) http.Handler {
			m := http.NewServeMux()
			h.Mount(m)
			return m
		}},
		{"StripPrefix", underPrefix, func(t *testing.T, h *mercure.Hub) http.Handler {
			inner := http.NewServeMux()
			inner.Handle("/.well-known/mercure", h)
			inner.Handle("/.well-known/mercure/", h)
			m := http.NewServeMux()
			m.Handle("/api/realtime/", http.StripPrefix("/api/realtime", inner))
			return m
		}},
	}
	for _, c := range recipes {
		t.Run(c.name, func(t *testing.T) {
			h, err := mercure.New(c.hubURL, withAuthIssuer(t), mercure.WithSubscriptions(), mercure.WithInsecurePlayground(),
				mercure.WithAnonymousSubscribers(), mercure.WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			th := startHubServer(t, h, c.app(t, h))
			claims := authClaims(detail("subscribe", exactTopic("*")))
			claims["aud"] = c.hubURL
			tok := mintToken(t, authSubKey, nil, claims)
			H := h.Path()
			lead, _ := strings.CutSuffix(H, "/.well-known/mercure") // "/api/realtime" or ""
			status := func(method, path string) int {
				t.Helper()
				req := mustRequest(t, method, th.srv.URL+path, "")
				req.Host = "example.com" // the playground hands tokens to its own host only
				req.Header.Set("Authorization", "Bearer "+tok)
				code, _, _ := do(t, req)
				return code
			}
			topic := url.PathEscape("urn:x")
			// A subscription, for the API's resource of one subscriber.
			th.subscribe("match=urn:x")
			req := mustRequest(t, http.MethodGet, th.srv.URL+H+"/subscriptions/exact/"+topic, "")
			req.Header.Set("Authorization", "Bearer "+tok)
			_, body, _ := do(t, req)
			m := subscriberField.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no subscriber in %s", body)
			}
			for _, sub := range []struct{ method, rest string }{
				{http.MethodGet, "/subscriptions"},
				{http.MethodGet, "/subscriptions/exact/" + topic},
				{http.MethodGet, "/subscriptions/exact/" + topic + "/" + url.PathEscape(m[1])},
				{http.MethodGet, "/debug/"},
				{http.MethodGet, "/debug/app.js"},
				{http.MethodGet, "/debug/activity"},
				{http.MethodPost, "/debug/token"},
			} {
				canonical := status(sub.method, H+sub.rest)
				if canonical != http.StatusOK {
					t.Errorf("%s %s: %d at the canonical path, want 200", sub.method, H+sub.rest, canonical)
				}
				for _, odd := range []string{
					H + H + sub.rest,
					H + "/x" + sub.rest,
					H + "/mercure" + sub.rest,
					lead + sub.rest,
					lead + "/mercure" + sub.rest,
					lead + "/x" + H + sub.rest,
					"/internal" + H + sub.rest,
				} {
					if got := status(sub.method, odd); got/100 == 2 {
						t.Errorf("%s %s: %d (the canonical path answers %d): want no answer outside the hub's path", sub.method, odd, got, canonical)
					}
				}
			}
		})
	}
}
