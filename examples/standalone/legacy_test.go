package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure/storetest"
)

// symfonySecret is the MERCURE_JWT_SECRET of the Symfony application in
// these tests, which the hub's -publisher-jwks and -subscriber-jwks hold.
const symfonySecret = "!ChangeThisMercureHubJWTSecretKey!"

// needPHP returns the php binary, or skips the test when PHP or
// Symfony's Mercure component is missing, unless MERCURE_TEST_PHP=1
// makes that a failure (CI installs php-cli and php-symfony-mercure).
func needPHP(t *testing.T) string {
	t.Helper()
	php, err := exec.LookPath("php")
	if err == nil {
		err = exec.Command(php, "-r", "require 'Symfony/Component/Mercure/autoload.php';").Run()
	}
	if err != nil {
		if os.Getenv("MERCURE_TEST_PHP") == "1" {
			t.Fatalf("MERCURE_TEST_PHP=1 but PHP with Symfony's Mercure component is missing: %v", err)
		}
		t.Logf("PHP with Symfony's Mercure component: %v", err)
		storetest.Skip(t, wantPHP)
	}
	return php
}

// secretJWKS writes a JWK Set holding the HMAC secret s.
func secretJWKS(t *testing.T, s string) string {
	t.Helper()
	key, err := jwk.Import([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	_ = set.AddKey(key)
	b, _ := json.Marshal(set)
	file := filepath.Join(t.TempDir(), "secret.jwks")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// legacySubscriberToken is the token a Symfony application's Twig
// mercure() helper sets in the mercureAuthorization cookie, subscribing
// to the URI template books/{id}.
func legacySubscriberToken(secret string) string {
	enc := base64.RawURLEncoding.EncodeToString
	input := enc([]byte(`{"typ":"JWT","alg":"HS256"}`)) + "." +
		enc(fmt.Appendf(nil, `{"exp":%d.5,"mercure":{"publish":[],"subscribe":["https://example.com/books/{id}"]}}`, time.Now().Add(time.Hour).Unix()))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(input))
	return input + "." + enc(mac.Sum(nil))
}

// startStandalone serves the standalone hub configured by args (plus
// -addr and -hub-url) and returns its hub endpoint.
func startStandalone(t *testing.T, args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub := "http://" + ln.Addr().String() + "/.well-known/mercure"
	serveOn(t, ln, append([]string{"-addr", ln.Addr().String(), "-hub-url", hub}, args...))
	return hub
}

// serveOn serves the standalone hub configured by args on ln until the
// test ends.
func serveOn(t *testing.T, ln net.Listener, args []string) *server {
	t.Helper()
	s, err := configure(args, slog.New(slog.DiscardHandler))
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.handler)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		s.hub.Shutdown(context.Background())
		srv.Close()
	})
	return s
}

// symfonyPublish runs the stock component's Hub::publish of a private
// update; it returns the id, or "refused STATUS CHALLENGE".
func symfonyPublish(t *testing.T, php, hub, topic, data string) string {
	t.Helper()
	out, err := exec.Command(php, filepath.Join("testdata", "symfony_publish.php"), hub, symfonySecret, topic, data).CombinedOutput()
	if err != nil {
		t.Fatalf("php: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// legacyStream subscribes as a browser of the Symfony application does:
// topic= and the mercureAuthorization cookie, plus the extra query.
func legacyStream(t *testing.T, hub, extra string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	u := hub + "?topic=" + url.QueryEscape("https://example.com/books/{id}") + extra
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Cookie", "mercureAuthorization="+legacySubscriberToken(symfonySecret))
	req.Header.Set("Sec-Fetch-Site", "same-origin") // the app's page: cookie streams from other sites are refused
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("subscribe: %d %s", res.StatusCode, b)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res, bufio.NewScanner(res.Body)
}

// nextEvent reads the next event's id and data lines.
func nextEvent(t *testing.T, sc *bufio.Scanner) (id string, lines []string) {
	t.Helper()
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && len(lines) > 0:
			return id, lines
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case line != "" && !strings.HasPrefix(line, ":"):
			lines = append(lines, line)
		}
	}
	t.Fatalf("stream ended: %v", sc.Err())
	return "", nil
}

// The "done when": the stock Symfony component publishes to the
// standalone hub run with -legacy-clients; a subscriber with topic= and
// the mercureAuthorization cookie gets the private update; a resume
// through lastEventID misses nothing.
func TestStandalone_SymfonyComponent(t *testing.T) {
	php := needPHP(t)
	jwks := secretJWKS(t, symfonySecret)
	hub := startStandalone(t, "-issuer", "https://app.example", "-publisher-jwks", jwks, "-subscriber-jwks", jwks, "-legacy-clients")

	res, sc := legacyStream(t, hub, "")
	first := symfonyPublish(t, php, hub, "https://example.com/books/1", "Dune")
	if !strings.HasPrefix(first, "urn:uuid:") {
		t.Fatalf("publish: %s", first)
	}
	id, lines := nextEvent(t, sc)
	if want := []string{"event: book", "retry: 3000", "data: Dune"}; id != first || strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("event %s %q, want %s %q", id, lines, first, want)
	}
	res.Body.Close()

	missed := []string{symfonyPublish(t, php, hub, "https://example.com/books/2", "a"), symfonyPublish(t, php, hub, "https://example.com/books/3", "b")}
	res, sc = legacyStream(t, hub, "&lastEventID="+url.QueryEscape(first))
	if got := res.Header.Get("Mercure-Last-Event-ID"); got != first {
		t.Errorf("Mercure-Last-Event-ID %q, want %q", got, first)
	}
	for _, want := range missed {
		if id, _ := nextEvent(t, sc); id != want {
			t.Fatalf("resumed with %s, want %s", id, want)
		}
	}
}

// Without -legacy-clients, the same publish is refused with a description
// that names the legacy claim and how to accept it.
func TestStandalone_SymfonyComponentRefused(t *testing.T) {
	php := needPHP(t)
	jwks := secretJWKS(t, symfonySecret)
	hub := startStandalone(t, "-issuer", "https://app.example", "-publisher-jwks", jwks, "-subscriber-jwks", jwks)
	got := symfonyPublish(t, php, hub, "https://example.com/books/1", "Dune")
	if !strings.HasPrefix(got, "refused 401 ") || !strings.Contains(got, `error="invalid_token"`) ||
		!strings.Contains(got, "mercure claim") || !strings.Contains(got, "-legacy-clients") {
		t.Fatalf("publish without -legacy-clients: %s", got)
	}
}
