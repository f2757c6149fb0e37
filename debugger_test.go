package mercure_test

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/debugui"
)

// debugPath is where the debugger of a hub at testHubURL is served.
const debugPath = "/.well-known/mercure/debug/"

// Without WithDebugger nothing of the debugger is served, whatever the
// router: Mount registers none of its paths, and the hub itself answers
// them 404 when a router hands them over.
func TestDebugger_OffByDefault(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, withAuthIssuer(t), mercure.WithSubscriptions(), mercure.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	h.Mount(muxFunc(func(p string, _ http.Handler) { patterns = append(patterns, p) }))
	if i := slices.IndexFunc(patterns, func(p string) bool { return strings.Contains(p, "/debug") }); i >= 0 {
		t.Errorf("Mount registered %q without WithDebugger", patterns[i])
	}
	mounted := http.NewServeMux()
	h.Mount(mounted)
	catchAll := http.NewServeMux()
	catchAll.Handle("/", h)
	for _, app := range []http.Handler{mounted, catchAll} {
		th := startHubServer(t, h, app)
		for _, p := range []string{"", "index.html", "app.js", "debug.css", "activity", "token"} {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				if status, body, _ := do(t, mustRequest(t, method, th.srv.URL+debugPath+p, "")); status != http.StatusNotFound {
					t.Errorf("%s %s: %d, want 404 without WithDebugger: %s", method, debugPath+p, status, body)
				}
			}
		}
		if status, _, _ := do(t, mustRequest(t, http.MethodGet, th.srv.URL+strings.TrimSuffix(debugPath, "/"), "")); status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", strings.TrimSuffix(debugPath, "/"), status)
		}
	}
}

// The page is plain files embedded in the library, each served with its
// type, nosniff and a revalidation tag; the page itself with a
// Content-Security-Policy that allows its own scripts and styles only,
// forbids framing, and holds no inline script or style for it to allow.
func TestDebugger_Page(t *testing.T) {
	t.Parallel()
	th := startMountedHub(t, withAuthIssuer(t), mercure.WithDebugger(), mercure.WithSubscriptions())
	base := th.srv.URL + debugPath
	status, page, hdr := do(t, mustRequest(t, http.MethodGet, base, ""))
	if status != http.StatusOK || hdr.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET %s: %d %s", debugPath, status, hdr.Get("Content-Type"))
	}
	csp := hdr.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows unsafe sources", csp)
	}
	for name, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Cache-Control": "no-cache"} {
		if got := hdr.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(tag, ` src="`) {
			t.Errorf("the page holds an inline script, %q, which its policy would block", tag)
		}
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script[^>]*>[^<]`),  // a script with a body
		regexp.MustCompile(`\son[a-z]+\s*=`),     // an event handler attribute
		regexp.MustCompile(`\sstyle\s*=|<style`), // inline style
	} {
		if m := bad.FindString(page); m != "" {
			t.Errorf("the page holds %q, which its policy would block", m)
		}
	}
	// The hub's settings, for the scripts to read.
	for _, want := range []string{`data-hub-url="` + testHubURL + `"`, `data-hub-path="/.well-known/mercure"`,
		`data-activity-topic="/.well-known/mercure/debug/activity"`, `data-subscriptions="true"`, `data-playground="false"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}

	// Every embedded file is served with its type; the page names its own.
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	entries, err := fs.ReadDir(debugui.Files, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		ext := e.Name()[strings.LastIndexByte(e.Name(), '.'):]
		if ext == ".html" {
			continue
		}
		want, _ := fs.ReadFile(debugui.Files, e.Name())
		status, body, hdr := do(t, mustRequest(t, http.MethodGet, base+e.Name(), ""))
		if status != http.StatusOK || body != string(want) || hdr.Get("Content-Type") != types[ext] || hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d %q nosniff=%q, %d bytes", e.Name(), status, hdr.Get("Content-Type"), hdr.Get("X-Content-Type-Options"), len(body))
		}
		req := mustRequest(t, http.MethodGet, base+e.Name(), "")
		req.Header.Set("If-None-Match", hdr.Get("ETag"))
		if status, _, _ := do(t, req); hdr.Get("ETag") == "" || status != http.StatusNotModified {
			t.Errorf("GET %s with its ETag %q: %d, want 304", e.Name(), hdr.Get("ETag"), status)
		}
	}
	for _, ref := range regexp.MustCompile(`(?:src|href)="([^":]+)"`).FindAllStringSubmatch(page, -1) {
		if status, _, _ := do(t, mustRequest(t, http.MethodGet, base+ref[1], "")); status != http.StatusOK {
			t.Errorf("the page refers to %s: %d", ref[1], status)
		}
	}

	cases := []struct {
		method, path string
		want         int
		header       string // a header the answer must have, "Name: value"
	}{
		{http.MethodPost, debugPath, http.StatusMethodNotAllowed, "Allow: GET, HEAD"},
		{http.MethodHead, debugPath, http.StatusOK, "Content-Type: text/html; charset=utf-8"},
		{http.MethodGet, debugPath + "nope.js", http.StatusNotFound, "Content-Type: application/problem+json"},
		{http.MethodGet, debugPath + "app.js/x", http.StatusNotFound, ""},
		{http.MethodGet, debugPath + "token", http.StatusNotFound, ""}, // no playground
		// The page's path without its slash: to the page, with its
		// subscription, relative so that it holds behind any prefix.
		{http.MethodGet, "/.well-known/mercure/debug?match=a%2Fb", http.StatusMovedPermanently, "Location: debug/?match=a%2Fb"},
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range cases {
		res, err := noRedirect.Do(mustRequest(t, c.method, th.srv.URL+c.path, ""))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		name, value, _ := strings.Cut(c.header, ": ")
		if res.StatusCode != c.want || (c.header != "" && res.Header.Get(name) != value) {
			t.Errorf("%s %s: %d %s=%q, want %d %s", c.method, c.path, res.StatusCode, name, res.Header.Get(name), c.want, c.header)
		}
	}
}

// The debugger is served wherever the hub is: at the hub path followed by
// /debug/, through every router and prefix the hub itself supports, and
// its pages find the hub from their own path.
func TestDebugger_Routing(t *testing.T) {
	t.Parallel()
	for _, c := range routingCases {
		t.Run(c.name, func(t *testing.T) {
			h, err := mercure.New(c.hubURL, append([]mercure.Option{withAuthIssuer(t), mercure.WithDebugger(), mercure.WithLogger(nil)}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			th := startHubServer(t, h, c.app(t, h))
			base := th.srv.URL + h.Path() + "/debug/"
			for p, want := range map[string]int{"": 200, "app.js": 200, "activity": 401} {
				status, body, hdr := do(t, mustRequest(t, http.MethodGet, base+p, ""))
				if status != want || hdr.Get("X-Frame-Options") != "DENY" {
					t.Errorf("GET %s: %d (X-Frame-Options %q), want %d: %.200s", h.Path()+"/debug/"+p, status, hdr.Get("X-Frame-Options"), want, body)
				}
			}
		})
	}
}

// Which paths name the debugger: the hub path followed by /debug,
// nothing that merely ends the same way.
func TestDebugger_Paths(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(prefixedHubURL, withAuthIssuer(t), mercure.WithDebugger(), mercure.WithSubscriptions(), mercure.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	th := startHubServer(t, h, h)
	for p, want := range map[string]int{
		"/api/realtime/.well-known/mercure/debug/":          200,
		"/.well-known/mercure/debug/":                       404,
		"/debug/":                                           404,
		"/internal/api/realtime/.well-known/mercure/debug/": 404,
		"/api/realtime/.well-known/mercure/debug":           301,
		"/other/debug/":                                     404,
		"/api/realtime/.well-known/mercurex/debug/":         404,
		"/api/realtime/.well-known/mercure/x/debug/":        404,
		"/api/realtime/.well-known/mercure/debug/a/b":       404,
		// The subscriptions API keeps its paths, "debug" topics included.
		"/api/realtime/.well-known/mercure/subscriptions/exact/debug": 401,
	} {
		rec := httptest.NewRecorder()
		th.Hub.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", p, rec.Code, want)
		}
	}
}

// The debugger's paths answer no other origin: WithCORS, which lets the
// listed origins read the hub's answers with credentials, does not apply
// to them.
func TestDebugger_NoCORS(t *testing.T) {
	t.Parallel()
	th := startMountedHub(t, withAuthIssuer(t), mercure.WithDebugger(), mercure.WithCORS("https://app.example"))
	tok := subToken(t, detail("subscribe", exactTopic("*")))
	for _, method := range []string{http.MethodGet, http.MethodOptions} {
		req := mustRequest(t, method, th.srv.URL+debugPath+"activity", "")
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Access-Control-Request-Method", http.MethodGet)
		req.Header.Set("Authorization", "Bearer "+tok)
		if _, _, hdr := do(t, req); hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s activity from a CORS origin: Access-Control-Allow-Origin %q", method, hdr.Get("Access-Control-Allow-Origin"))
		}
	}
	// The hub endpoint keeps its CORS.
	req := mustRequest(t, http.MethodOptions, th.endpoint(), "")
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", http.MethodPost)
	if _, _, hdr := do(t, req); hdr.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("preflight of the hub endpoint: Access-Control-Allow-Origin %q", hdr.Get("Access-Control-Allow-Origin"))
	}
}

// The activity figures are served to a token or session granting
// subscribe on the hub path followed by /debug/activity, as a topic, and
// to no other: 401 without credentials, 403 with grants that lack it,
// each with a Bearer challenge and a problem document naming the grant.
func TestDebugger_ActivityAuthorization(t *testing.T) {
	t.Parallel()
	session := func(r *http.Request) (*mercure.Access, error) {
		switch r.Header.Get("X-Session") {
		case "viewer":
			return &mercure.Access{Subscribe: []mercure.Match{{Pattern: "/.well-known/mercure/debug/activity"}}}, nil
		case "other":
			return &mercure.Access{Subscribe: []mercure.Match{{Pattern: "https://example.com/books/1"}}}, nil
		}
		return nil, nil
	}
	th := startMountedHub(t, withAuthIssuer(t), mercure.WithDebugger(), mercure.WithSubscriptions(),
		mercure.WithAuthorizer(session, time.Minute))
	const needs = "granting subscribe on /.well-known/mercure/debug/activity"
	expired := authClaims(detail("subscribe", exactTopic("*")))
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	cases := []struct {
		name      string
		header    []string
		want      int
		challenge string
	}{
		{"no credentials", nil, 401, challengeNone},
		{"a token for other topics", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", exactTopic("https://example.com/books/1")))}, 403, challengeScope},
		{"a token for the subscriptions API", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", patternTopic("/.well-known/mercure/subscriptions{/*}?")))}, 403, challengeScope},
		{"a publisher token", []string{"Authorization", "Bearer " + pubToken(t, detail("publish,subscribe", exactTopic("*")))}, 401, challengeInvalidToken},
		{"an expired token", []string{"Authorization", "Bearer " + mintToken(t, authSubKey, nil, expired)}, 401, challengeInvalidToken},
		{"the exact topic", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", exactTopic("/.well-known/mercure/debug/activity")))}, 200, ""},
		{"the absolute topic", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", exactTopic("https://example.com/.well-known/mercure/debug/activity")))}, 403, challengeScope},
		{"a pattern of the hub path", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", patternTopic("/.well-known/mercure/{*}")))}, 200, ""},
		{"*", []string{"Authorization", "Bearer " + subToken(t, detail("subscribe", exactTopic("*")))}, 200, ""},
		{"a session granting it", []string{"X-Session", "viewer"}, 200, ""},
		{"a session for other topics", []string{"X-Session", "other"}, 403, challengeScope},
	}
	for _, c := range cases {
		req := mustRequest(t, http.MethodGet, th.srv.URL+debugPath+"activity", "")
		for i := 0; i < len(c.header); i += 2 {
			req.Header.Set(c.header[i], c.header[i+1])
		}
		status, body, hdr := do(t, req)
		if status != c.want || bareChallenge(hdr.Get("WWW-Authenticate")) != c.challenge {
			t.Errorf("%s: %d %q, want %d %q", c.name, status, hdr.Get("WWW-Authenticate"), c.want, c.challenge)
			continue
		}
		switch {
		case status == 200:
			var doc struct {
				Samples []json.RawMessage `json:"samples"`
			}
			if hdr.Get("Content-Type") != "application/json" || hdr.Get("Cache-Control") != "no-store" || json.Unmarshal([]byte(body), &doc) != nil {
				t.Errorf("%s: %s %q", c.name, hdr.Get("Content-Type"), body)
			}
		case c.challenge != challengeInvalidToken && !strings.Contains(body, needs):
			t.Errorf("%s: the refusal does not say which grant is needed: %s", c.name, body)
		}
	}
}
