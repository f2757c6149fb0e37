package mercure_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
)

// prefixedHubURL is the public URL of a hub that an application serves
// under /api/realtime.
const prefixedHubURL = "https://example.com/api/realtime/.well-known/mercure"

// routingCases are the ways applications route requests to a hub: each
// builds the application's handler for h. Clients always use the public
// paths: the hub URL's path, its subscriptions API and
// [mercure.Hub.MetadataPath]. The cases for chi and gorilla/mux are in
// examples/routers, so that this module requires no router.
var routingCases = []struct {
	name   string
	hubURL string
	opts   []mercure.Option // the proxies' paths
	app    func(t *testing.T, h *mercure.Hub) http.Handler
}{
	{"servemux/Mount", testHubURL, nil, func(t *testing.T, h *mercure.Hub) http.Handler {
		m := http.NewServeMux()
		h.Mount(m)
		return m
	}},
	{"servemux/Mount/prefix", prefixedHubURL, nil, func(t *testing.T, h *mercure.Hub) http.Handler {
		m := http.NewServeMux()
		h.Mount(m)
		m.HandleFunc("/api/realtime/books", func(w http.ResponseWriter, r *http.Request) {}) // the app's own routes beside it
		return m
	}},
	{"servemux/StripPrefix", prefixedHubURL, nil, func(t *testing.T, h *mercure.Hub) http.Handler {
		inner := http.NewServeMux()
		inner.Handle("/.well-known/mercure", h)
		inner.Handle("/.well-known/mercure/", h)
		m := http.NewServeMux()
		m.Handle("/api/realtime/", http.StripPrefix("/api/realtime", inner))
		m.Handle(h.MetadataPath(), h)
		return m
	}},
	{"servemux/StripPrefix/whole-hub-path", testHubURL, nil, func(t *testing.T, h *mercure.Hub) http.Handler {
		m := http.NewServeMux()
		m.Handle(h.Path(), http.StripPrefix(h.Path(), h))
		m.Handle(h.Path()+"/", http.StripPrefix(h.Path(), h))
		m.Handle(h.MetadataPath(), h)
		return m
	}},
	{"servemux/StripPrefix/whole-hub-path/prefix", prefixedHubURL, nil, func(t *testing.T, h *mercure.Hub) http.Handler {
		m := http.NewServeMux()
		m.Handle(h.Path(), http.StripPrefix(h.Path(), h))
		m.Handle(h.Path()+"/", http.StripPrefix(h.Path(), h))
		m.Handle(h.MetadataPath(), h)
		return m
	}},
	{"proxy-strips-prefix", prefixedHubURL, []mercure.Option{mercure.WithProxyPath("/.well-known/mercure")}, func(t *testing.T, h *mercure.Hub) http.Handler {
		// The application behind the proxy knows nothing of /api/realtime.
		app := http.NewServeMux()
		h.Mount(app)
		return rewritePath(app, func(p string) string {
			if rest, ok := strings.CutPrefix(p, "/api/realtime/"); ok {
				return "/" + rest
			}
			return p
		})
	}},
	{"proxy-adds-prefix", prefixedHubURL, []mercure.Option{mercure.WithProxyPath("/internal/api/realtime/.well-known/mercure")}, func(t *testing.T, h *mercure.Hub) http.Handler {
		// The application serves everything under /internal.
		app := http.NewServeMux()
		h.Mount(app) // the metadata behind the prefix too
		return rewritePath(app, func(p string) string { return "/internal" + p })
	}},
}

// rewritePath is a reverse proxy in miniature: it rewrites the path of
// each request, escaped form and request line included, before the
// application sees it.
func rewritePath(next http.Handler, rewrite func(string) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = rewrite(r.URL.Path)
		if r.URL.RawPath != "" {
			r2.URL.RawPath = rewrite(r.URL.RawPath)
		}
		r2.RequestURI = r2.URL.RequestURI()
		next.ServeHTTP(w, r2)
	})
}

// The hub serves its stream, publication, subscriptions API and metadata
// wherever the application routes it: net/http's ServeMux (chi and
// gorilla/mux in examples/routers), with and without a prefix, behind
// http.StripPrefix and behind proxies that strip or add a prefix. Identifiers (subscription
// ids, the metadata's resource) are those of the public URL throughout.
func TestRouting(t *testing.T) {
	t.Parallel()
	for _, c := range routingCases {
		t.Run(c.name, func(t *testing.T) {
			h, err := mercure.New(c.hubURL, append([]mercure.Option{mercure.WithInsecurePublishing(), withAuthIssuer(t),
				mercure.WithAnonymousSubscribers(), mercure.WithSubscriptions()}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			th := startHubServer(t, h, c.app(t, h))
			claims := authClaims(detail("subscribe", exactTopic("*")))
			claims["aud"] = c.hubURL
			tok := mintToken(t, authSubKey, nil, claims)
			get := func(path string) (int, string) {
				t.Helper()
				req := mustRequest(t, http.MethodGet, th.srv.URL+path, "")
				req.Header.Set("Authorization", "Bearer "+tok)
				status, body, _ := do(t, req)
				return status, body
			}

			// The stream and publication.
			const topic = "https://example.com/books/1" // its escaped form holds %2F
			s := th.subscribe("match=" + url.QueryEscape(topic))
			id := th.mustPost("topic=" + url.QueryEscape(topic))
			if ev := s.next(t); ev.ID != id {
				t.Fatalf("stream got %+v, want %s", ev, id)
			}

			// The subscriptions API: the collection, one matcher's, one.
			api := h.Path() + "/subscriptions"
			status, body := get(api)
			var coll struct {
				ID            string                 `json:"id"`
				Subscriptions []mercure.Subscription `json:"subscriptions"`
			}
			if status != http.StatusOK || json.Unmarshal([]byte(body), &coll) != nil || coll.ID != api || len(coll.Subscriptions) != 1 {
				t.Fatalf("GET %s: %d %s", api, status, body)
			}
			one := coll.Subscriptions[0]
			matcher := api + "/exact/https%3A%2F%2Fexample.com%2Fbooks%2F1"
			if !strings.HasPrefix(one.ID, matcher+"/") {
				t.Fatalf("subscription id %q, want it under %s", one.ID, matcher)
			}
			if status, body := get(matcher); status != http.StatusOK || !strings.Contains(body, `"id":"`+matcher+`"`) {
				t.Errorf("GET %s: %d %s", matcher, status, body)
			}
			if status, body := get(one.ID); status != http.StatusOK || !strings.Contains(body, `"id":"`+one.ID+`"`) {
				t.Errorf("GET %s: %d %s", one.ID, status, body)
			}

			// The protected resource metadata, at the root of the host.
			status, body = get(h.MetadataPath())
			var meta struct {
				Resource string `json:"resource"`
			}
			if status != http.StatusOK || json.Unmarshal([]byte(body), &meta) != nil || meta.Resource != c.hubURL {
				t.Errorf("GET %s: %d %s", h.MetadataPath(), status, body)
			}
		})
	}
}

// Which request paths name which of the hub's routes: the endpoint
// (OPTIONS answers 204), the subscriptions API (401 without a token: the
// route is known) or nothing (404), for a hub handed every request, as
// is, behind http.StripPrefix, and with mount points declared for
// proxies. Only a mount point followed by a route names it; a path that
// merely ends like one does not.
func TestRouting_Paths(t *testing.T) {
	t.Parallel()
	const H = "/api/realtime/.well-known/mercure"
	h, err := mercure.New(prefixedHubURL, withAuthIssuer(t), mercure.WithSubscriptions(), mercure.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	declared, err := mercure.New(prefixedHubURL, withAuthIssuer(t), mercure.WithSubscriptions(), mercure.WithLogger(nil),
		mercure.WithProxyPath("/.well-known/mercure"), // a proxy strips /api/realtime
		mercure.WithProxyPath("/internal"+H))          // a proxy adds /internal
	if err != nil {
		t.Fatal(err)
	}
	defer declared.Shutdown(context.Background())
	cases := []struct {
		hub          *mercure.Hub
		strip        string // what http.StripPrefix removes before the hub
		method, path string // the path as the client sends it
		want         int
	}{
		// The endpoint: the hub path, segments compared decoded.
		{h, "", "OPTIONS", H, 204},
		{h, "", "OPTIONS", "/api/realtime/.well-known/%6Dercure", 204},
		// Not the endpoint: another last segment, a trailing slash, an
		// encoded slash inside a segment, a trailing part of the hub path,
		// the hub path behind a prefix or after itself.
		{h, "", "OPTIONS", H + "x", 404},
		{h, "", "OPTIONS", H + "/", 404},
		{h, "", "OPTIONS", "/api/realtime/.well-known%2Fmercure", 404},
		{h, "", "OPTIONS", H + "/other", 404},
		{h, "", "OPTIONS", "/realtime/.well-known/mercure", 404},
		{h, "", "OPTIONS", "/.well-known/mercure", 404},
		{h, "", "OPTIONS", "/mercure", 404},
		{h, "", "OPTIONS", "/", 404},
		{h, "", "OPTIONS", "/internal" + H, 404},
		{h, "", "OPTIONS", H + H, 404},
		// The subscriptions API after the hub path.
		{h, "", "GET", H + "/subscriptions", 401},
		{h, "", "GET", H + "/subscriptions/exact/x", 401},
		{h, "", "GET", H + "/subscriptions/urlpattern/a%2Fb/urn%3Ax", 401},
		{h, "", "GET", H + "/subscriptions/exact/x/y", 401},
		{h, "", "GET", H + "/subscriptions/exact/mercure/subscriptions", 401},
		// Under the API, but none of its resources.
		{h, "", "GET", H + "/subscriptions/exact", 404},
		{h, "", "GET", H + "/subscriptions/other/x", 404},
		{h, "", "GET", H + "/subscriptions/exact/x/y/z", 404},
		{h, "", "GET", H + "/subscriptions/exact/%2E%2E", 404},
		// Paths that end like the API, after no mount point (issue 24).
		{h, "", "GET", "/other/subscriptions", 404},
		{h, "", "GET", "/subscriptions", 404},
		{h, "", "GET", "/.well-known/mercure/subscriptions", 404},
		{h, "", "GET", "/internal" + H + "/subscriptions", 404},
		{h, "", "GET", H + H + "/subscriptions", 404},
		{h, "", "GET", H + "/mercure/subscriptions", 404},
		{h, "", "GET", H + "/x" + H + "/subscriptions/exact/x", 404},
		// Behind http.StripPrefix: the stripped part counts.
		{h, "/api/realtime", "OPTIONS", H, 204},
		{h, "/api/realtime", "GET", H + "/subscriptions", 401},
		{h, "/api/realtime", "GET", "/api/realtime/subscriptions", 404},
		{h, "/api/realtime", "GET", "/api/realtime/mercure/subscriptions", 404},
		{h, "/api/realtime", "GET", "/api/realtime" + H + "/subscriptions", 404},
		{h, H, "OPTIONS", H, 204},
		{h, H, "GET", H + "/subscriptions", 401},
		{h, H, "GET", H + H + "/subscriptions", 404},
		// Mount points declared for proxies that strip or add a prefix,
		// in place of the hub path: a request that reaches it did not
		// come through the proxies, whose guards it would walk around.
		{declared, "", "OPTIONS", H, 404},
		{declared, "", "OPTIONS", "/.well-known/mercure", 204},
		{declared, "", "GET", "/.well-known/mercure/subscriptions", 401},
		{declared, "", "GET", "/internal" + H + "/subscriptions/exact/x", 401},
		{declared, "", "GET", "/subscriptions", 404},
		{declared, "", "GET", "/other/internal" + H + "/subscriptions", 404},
		{declared, "", "GET", "/mercure/subscriptions", 404},
	}
	for _, c := range cases {
		var handler http.Handler = c.hub
		if c.strip != "" {
			handler = http.StripPrefix(c.strip, c.hub)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.want {
			t.Errorf("%s %s (stripped %q): %d, want %d (%s)", c.method, c.path, c.strip, rec.Code, c.want, rec.Body)
		}
	}
}

// In each recipe of the docs, an application that guards the
// subscriptions API and the debugger at their paths (admins only) keeps
// them guarded: no other path that its router hands the hub reaches them
// (issue 24: a subtree handed to the hub, by chi's Mount, gorilla's
// PathPrefix or http.StripPrefix, served the listing at paths that only
// ended like the API's).
func TestRouting_GuardedPaths(t *testing.T) {
	t.Parallel()
	for _, c := range routingCases {
		t.Run(c.name, func(t *testing.T) {
			h, err := mercure.New(c.hubURL, append([]mercure.Option{withAuthIssuer(t), mercure.WithSubscriptions(), mercure.WithDebugger(), mercure.WithLogger(nil)}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			H := h.Path()
			adminsOnly := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					p := r.URL.Path
					if (strings.HasPrefix(p, H+"/subscriptions") || strings.HasPrefix(p, H+"/debug")) && r.Header.Get("X-Admin") != "yes" {
						http.Error(w, "admins only", http.StatusForbidden)
						return
					}
					next.ServeHTTP(w, r)
				})
			}
			th := startHubServer(t, h, adminsOnly(c.app(t, h)))
			claims := authClaims(detail("subscribe", exactTopic("*")))
			claims["aud"] = c.hubURL
			tok := mintToken(t, authSubKey, nil, claims)
			get := func(path string, admin bool) int {
				t.Helper()
				req := mustRequest(t, http.MethodGet, th.srv.URL+path, "")
				req.Header.Set("Authorization", "Bearer "+tok)
				if admin {
					req.Header.Set("X-Admin", "yes")
				}
				status, _, _ := do(t, req)
				return status
			}
			// The guard works where it is put, and the admin gets through.
			for _, p := range []string{H + "/subscriptions", H + "/debug/"} {
				if got := get(p, false); got != http.StatusForbidden {
					t.Errorf("GET %s, not an admin: %d, want 403", p, got)
				}
				if got := get(p, true); got != http.StatusOK {
					t.Errorf("GET %s, an admin: %d, want 200", p, got)
				}
			}
			lead, _ := strings.CutSuffix(H, "/.well-known/mercure") // "/api/realtime" or ""
			for _, p := range []string{
				H + H + "/subscriptions",
				H + "/mercure/subscriptions",
				H + "/x" + H + "/subscriptions",
				lead + "/subscriptions",
				lead + "/mercure/subscriptions",
				lead + H + "/subscriptions",
				"/internal" + H + "/subscriptions",
				H + H + "/debug/",
				lead + "/debug/",
				lead + "/mercure/debug/",
				lead + H + "/debug/",
			} {
				if got := get(p, false); got == http.StatusOK {
					t.Errorf("GET %s, not an admin: 200, want the guard's 403 or a 404", p)
				}
			}
		})
	}
}

// A request reaching the hub at a path it does not serve gets a 404 whose
// problem document says what the hub serves and what it got; the hub logs
// it once at Warn, whatever the number of such requests.
func TestRouting_Diagnostic(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h, err := mercure.New(prefixedHubURL, mercure.WithInsecurePublishing(), mercure.WithLogger(logs.logger()))
	if err != nil {
		t.Fatal(err)
	}
	m := http.NewServeMux()
	m.Handle("/realtime/", h) // routed to the hub at another path than its own
	m.Handle(h.Path()+"/", h)
	th := startHubServer(t, h, m)
	for _, p := range []string{"/realtime/hub", "/realtime/other", "/realtime/hub/subscriptions"} {
		status, body, hdr := do(t, mustRequest(t, http.MethodGet, th.srv.URL+p, ""))
		if status != http.StatusNotFound || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("GET %s: %d %s", p, status, hdr.Get("Content-Type"))
		}
		var doc struct{ Detail string }
		if json.Unmarshal([]byte(body), &doc) != nil || !strings.Contains(doc.Detail, "at /api/realtime/.well-known/mercure only") || !strings.Contains(doc.Detail, `got "`+p+`"`) {
			t.Errorf("GET %s: detail %q", p, body)
		}
	}
	if n := logs.count("level=WARN"); n != 1 {
		t.Errorf("%d Warn lines, want 1:\n%s", n, logs.text())
	}
	if logs.count("path=/realtime/hub") != 1 || logs.count("rewriting the hub path") != 1 {
		t.Errorf("the log line does not name the path and the likely cause:\n%s", logs.text())
	}

	// The subscriptions API, asked of a hub that does not serve it: one
	// line saying which option serves it.
	for range 3 {
		if status, body, _ := do(t, mustRequest(t, http.MethodGet, th.srv.URL+h.Path()+"/subscriptions", "")); status != http.StatusNotFound || !strings.Contains(body, "subscriptions API") {
			t.Errorf("subscriptions API without WithSubscriptions: %d %s", status, body)
		}
	}
	if n := logs.count("WithSubscriptions"); n != 1 {
		t.Errorf("%d lines naming WithSubscriptions, want 1:\n%s", n, logs.text())
	}
}

// WithProxyPath takes an absolute path without a trailing slash, query or
// fragment, and refuses anything else; Mount registers the hub's routes
// there alone, and the metadata at the hub's own metadata path, and
// behind the prefix of a proxy path that adds one.
func TestWithProxyPath(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "internal/hub", "/internal/hub/", "/hub?x=1", "/hub#x", "/a%zz"} {
		if _, err := mercure.New(prefixedHubURL, mercure.WithProxyPath(p)); !errors.Is(err, mercure.ErrInvalidOption) {
			t.Errorf("WithProxyPath(%q): %v, want ErrInvalidOption", p, err)
		}
	}
	h, err := mercure.New(prefixedHubURL, mercure.WithLogger(nil), mercure.WithProxyPath("/internal/hub"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	var got []string
	h.Mount(muxFunc(func(pattern string, _ http.Handler) { got = append(got, pattern) }))
	if want := []string{"/internal/hub", h.MetadataPath()}; !slices.Equal(got, want) {
		t.Errorf("Mount registered %q, want %q", got, want)
	}
	h2, err := mercure.New(prefixedHubURL, mercure.WithLogger(nil), mercure.WithProxyPath("/internal"+h.Path()), mercure.WithProxyPath(h.Path()))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Shutdown(context.Background())
	got = nil
	h2.Mount(muxFunc(func(pattern string, _ http.Handler) { got = append(got, pattern) }))
	if want := []string{"/internal" + h.Path(), h.Path(), h.MetadataPath(), "/internal" + h.MetadataPath()}; !slices.Equal(got, want) {
		t.Errorf("Mount registered %q, want %q", got, want)
	}
}

type muxFunc func(string, http.Handler)

func (f muxFunc) Handle(pattern string, h http.Handler) { f(pattern, h) }

func (l *logBuffer) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
