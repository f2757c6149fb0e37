package mercure_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
)

// SUB-18, SEC-5, ACT-18: credentialed CORS for allowlisted origins only,
// never "*" nor a reflected unlisted origin; Link and
// Mercure-Last-Event-ID exposed; preflights answered.
func TestSUB18_CORS(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithCORS("https://app.example.com", "http://localhost:3000"))
	get := func(origin string, header ...string) *http.Response {
		t.Helper()
		req := mustRequest(t, http.MethodGet, th.endpoint()+"?match=x", "")
		req.Header.Set("Origin", origin)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := get("https://app.example.com")
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example.com" {
		t.Errorf("allowed origin: Access-Control-Allow-Origin %q", got)
	}
	if res.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Error("allowed origin: no Access-Control-Allow-Credentials: true")
	}
	exposed := strings.ToLower(res.Header.Get("Access-Control-Expose-Headers"))
	if !strings.Contains(exposed, "link") || !strings.Contains(exposed, "mercure-last-event-id") {
		t.Errorf("Access-Control-Expose-Headers %q", exposed)
	}
	if !strings.Contains(strings.Join(res.Header.Values("Vary"), ","), "Origin") {
		t.Errorf("Vary %q", res.Header.Values("Vary"))
	}
	for _, unlisted := range []string{"https://evil.example", "https://app.example.com.evil.example", "null"} {
		if got := get(unlisted).Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("unlisted origin %q: Access-Control-Allow-Origin %q", unlisted, got)
		}
	}

	// A method the hub refuses, which a page may send without a
	// preflight (HEAD), gets its 405 with the CORS headers: the page sees
	// the status, not a CORS failure (issue 41).
	head := mustRequest(t, http.MethodHead, th.endpoint(), "")
	head.Header.Set("Origin", "https://app.example.com")
	if status, _, hdr := do(t, head); status != http.StatusMethodNotAllowed || hdr.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("HEAD from an allowed origin: %d, Access-Control-Allow-Origin %q; want 405 with the origin", status, hdr.Get("Access-Control-Allow-Origin"))
	}

	// A fetch() sending Authorization and Last-Event-ID is preflighted.
	req := mustRequest(t, http.MethodOptions, th.endpoint(), "")
	req.Header.Set("Origin", "http://localhost:3000")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "authorization,last-event-id")
	status, _, hdr := do(t, req)
	if status/100 != 2 || hdr.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Fatalf("preflight: %d, Allow-Origin %q", status, hdr.Get("Access-Control-Allow-Origin"))
	}
	allowed := strings.ToLower(hdr.Get("Access-Control-Allow-Headers"))
	if !strings.Contains(allowed, "authorization") || !strings.Contains(allowed, "last-event-id") {
		t.Errorf("preflight Access-Control-Allow-Headers %q", allowed)
	}
	req.Header.Set("Origin", "https://evil.example")
	if _, _, hdr := do(t, req); hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Error("preflight from an unlisted origin allowed")
	}
}

func TestSUB18_CORSOriginsAreValidated(t *testing.T) {
	t.Parallel()
	for _, o := range []string{"*", "https://*.example.com", "example.com", "https://example.com/path", "ftp://example.com"} {
		if _, err := mercure.New(testHubURL, mercure.WithCORS(o)); !errors.Is(err, mercure.ErrInvalidOption) {
			t.Errorf("origin %q: %v", o, err)
		}
	}
}

// SEC-4 with CORS: a cookie-authenticated publish is accepted from an
// allowlisted origin as from the hub's own, and refused from others.
func TestSEC4_CookiePublishFromCORSOrigin(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithCORS("https://app.example.com"))
	const topic = "https://example.com/books/1"
	ck := mercure.DefaultCookieName + "=" + pubToken(t, detail("publish", exactTopic(topic)))
	for origin, want := range map[string]int{"https://app.example.com": 200, "https://other.example.com": 403} {
		status, body, _ := th.request(http.MethodPost, "", form("topic", topic), "Cookie", ck, "Origin", origin)
		if status != want {
			t.Errorf("Origin %s: %d, want %d (%s)", origin, status, want, body)
		}
	}
}
