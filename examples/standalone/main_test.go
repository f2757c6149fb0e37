package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/boltstore"
	"github.com/mercurekit/mercure/pgstore/pgtest"
	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/storetest"
)

func TestStandalone(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-subscriptions", "-cors-origins", "https://app.example", "-history", "10"}, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	defer s.hub.Shutdown(context.Background())

	res, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(page), `const hubPath = "/.well-known/mercure"`) || !strings.Contains(string(page), "EventSource") {
		t.Fatalf("page: %d\n%s", res.StatusCode, page)
	}

	sub, err := http.Get(srv.URL + "/.well-known/mercure?match=" + url.QueryEscape("https://example.com/books/1"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Body.Close()
	pub, err := http.PostForm(srv.URL+"/.well-known/mercure", url.Values{"topic": {"https://example.com/books/1"}, "data": {"hello"}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := io.ReadAll(pub.Body)
	pub.Body.Close()
	if pub.StatusCode != 200 {
		t.Fatalf("publish: %d %s", pub.StatusCode, id)
	}
	sc := bufio.NewScanner(sub.Body)
	var lines []string
	for blocks := 0; blocks < 2 && sc.Scan(); { // the stream's position, then the update
		if sc.Text() == "" {
			blocks++
			continue
		}
		lines = append(lines, sc.Text())
	}
	if want := []string{"id: earliest", "id: " + string(id), "data: hello"}; strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("event %q, want %q", lines, want)
	}
}

func TestStandalone_PublishNeedsFlag(t *testing.T) {
	s, err := configure([]string{"-addr", "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.hub.Shutdown(context.Background())
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	res, err := http.PostForm(srv.URL+"/.well-known/mercure", url.Values{"topic": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("publish without -insecure-publish: %d", res.StatusCode)
	}
}

// testIssuer is the -issuer of the token tests.
const testIssuer = "https://issuer.example"

// newSigningKey returns a new ES256 key and the path of a JWK Set file
// holding its public half.
func newSigningKey(t *testing.T) (jwk.Key, string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.Import(priv)
	if err != nil {
		t.Fatal(err)
	}
	_ = key.Set(jwk.KeyIDKey, "k1")
	_ = key.Set(jwk.AlgorithmKey, jwa.ES256())
	pub, err := key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	b, _ := json.Marshal(set)
	file := filepath.Join(t.TempDir(), "keys.jwks")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return key, file
}

// signToken returns an access token of testIssuer for the hub at hubURL,
// granting action on the exact topic match, with payload unless it is nil.
func signToken(t *testing.T, key jwk.Key, hubURL, action, match string, payload any) string {
	t.Helper()
	detail := map[string]any{
		"type": "https://mercure.rocks/authorization-detail", "actions": []string{action},
		"topics": []any{map[string]any{"match": match}},
	}
	if payload != nil {
		detail["payload"] = payload
	}
	tok, err := jwt.NewBuilder().Issuer(testIssuer).Audience([]string{hubURL}).
		Subject("app").IssuedAt(time.Now()).Expiration(time.Now().Add(time.Minute)).JwtID("1").
		Claim("client_id", "app").
		Claim("authorization_details", []any{detail}).Build()
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.TypeKey, "at+jwt")
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(signed)
}

// The launch contract's token flags: publishing needs a token signed by a
// key of -publisher-jwks for -issuer, and the metadata document is served.
func TestStandalone_Tokens(t *testing.T) {
	key, file := newSigningKey(t)
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-hub-url", "https://hub.example/.well-known/mercure",
		"-issuer", testIssuer, "-publisher-jwks", file, "-anonymous"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.hub.Shutdown(context.Background())
	srv := httptest.NewServer(s.handler)
	defer srv.Close()

	signed := signToken(t, key, "https://hub.example/.well-known/mercure", "publish", "*", nil)
	for _, c := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer " + signed, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/.well-known/mercure", strings.NewReader("topic=x"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Fatalf("publish with %.20q: %d, want %d", c.auth, res.StatusCode, c.want)
		}
	}
	res, err := http.Get(srv.URL + "/.well-known/oauth-protected-resource/.well-known/mercure")
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(meta), `"resource":"https://hub.example/.well-known/mercure"`) {
		t.Fatalf("metadata: %d %s", res.StatusCode, meta)
	}
}

// With -subscriptions, who is connected (subscriptions, topics, token
// payloads) is for tokens granting subscribe on the subscriptions API
// only, as the hub's API decides (ACT-13, SEC-15): an anonymous client
// reads none of it, from the page's server or from the hub. The page
// lists it through that API, with a token the user gives it.
func TestStandalone_Presence(t *testing.T) {
	const hubURL = "https://hub.example/.well-known/mercure"
	key, file := newSigningKey(t)
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-hub-url", hubURL, "-subscriptions", "-anonymous",
		"-issuer", testIssuer, "-subscriber-jwks", file}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.hub.Shutdown(context.Background())
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	// A subscriber whose token carries a payload.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/.well-known/mercure?match=urn%3Aroom%3A1", nil)
	req.Header.Set("Authorization", "Bearer "+signToken(t, key, hubURL, "subscribe", "urn:room:1", map[string]string{"name": "Alice"}))
	sub, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Body.Close()
	if sub.StatusCode != http.StatusOK {
		t.Fatalf("subscribe: %d", sub.StatusCode)
	}

	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, path := range []string{"/presence", "/.well-known/mercure/subscriptions"} {
		if status, body := get(path, ""); status == http.StatusOK || strings.Contains(body, "urn:room:1") || strings.Contains(body, "Alice") {
			t.Errorf("anonymous GET %s: %d %s", path, status, body)
		}
	}
	apiToken := signToken(t, key, hubURL, "subscribe", "/.well-known/mercure/subscriptions", nil)
	if status, body := get("/.well-known/mercure/subscriptions", apiToken); status != http.StatusOK ||
		!strings.Contains(body, `"match":"urn:room:1"`) || !strings.Contains(body, `"payload":{"name":"Alice"}`) {
		t.Fatalf("subscriptions API with a token granting it: %d %s", status, body)
	}
	_, html := get("/", "")
	if !strings.Contains(html, `id="presence"`) || !strings.Contains(html, `fetch(hubPath + "/subscriptions"`) ||
		strings.Contains(html, `"/presence"`) {
		t.Fatal("the page does not list subscriptions through the hub's API")
	}
}

// -store bolt:PATH keeps history across restarts.
func TestStandalone_BoltStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	args := []string{"-addr", "127.0.0.1:0", "-insecure-publish", "-store", "bolt:" + path}
	s, err := configure(args, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler)
	res, err := http.PostForm(srv.URL+"/.well-known/mercure", url.Values{"topic": {"x"}, "data": {"kept"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	srv.Close()
	if err := s.hub.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.closeStore(); err != nil {
		t.Fatal(err)
	}

	// Restarted on the same file: the update is still there.
	s, err = configure(args, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.closeStore()
	defer s.hub.Shutdown(context.Background())
	srv = httptest.NewServer(s.handler)
	defer srv.Close()
	sub, err := http.Get(srv.URL + "/.well-known/mercure?match=x&last_event_id=earliest")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Body.Close()
	sc := bufio.NewScanner(sub.Body)
	for sc.Scan() {
		if sc.Text() == "data: kept" {
			return
		}
		if sc.Text() == "" {
			break
		}
	}
	t.Fatal("the update did not survive the restart")
}

func TestStandalone_BadStore(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"mongo://x", "bolt:"} {
		if _, err := configure([]string{"-store", spec}, slog.New(slog.DiscardHandler)); err == nil {
			t.Fatalf("unknown store %q accepted", spec)
		}
	}
	// Nothing listens on port 1: the hub fails at start-up (configure
	// returns the error), not at its first publish.
	if _, err := configure([]string{"-store", "redis://127.0.0.1:1/0"}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("unreachable Redis accepted")
	}
	if _, err := configure([]string{"-store", "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable"}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("unreachable PostgreSQL accepted")
	}
	if _, err := configure([]string{"-store", "postgres://postgres@127.0.0.1:1/postgres?prefix=Bad-Name"}, slog.New(slog.DiscardHandler)); !errors.Is(err, mercure.ErrInvalidOption) {
		t.Fatalf("invalid table prefix: %v, want ErrInvalidOption", err)
	}
}

// -store postgres://... shares the history between hubs: an update
// published on one reaches the subscribers of the other, and is replayed
// from PostgreSQL.
func TestStandalone_PostgresStore(t *testing.T) {
	dsn := pgtest.DSN(t)
	prefix := fmt.Sprintf("standalone_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			return
		}
		defer pool.Close()
		if err := pgtest.Drop(pool, prefix); err != nil {
			t.Errorf("dropping %s_*: %v", prefix, err)
		}
		if left, err := pgtest.Leftovers(pool, prefix); err != nil || len(left) != 0 {
			t.Errorf("%q of %s_* left behind (%v)", left, prefix, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	a, b := twoHubs(t, u.String())
	publish := func(data string) {
		t.Helper()
		res, err := http.PostForm(a, url.Values{"topic": {"x"}, "data": {data}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("publish %s: %d", data, res.StatusCode)
		}
	}
	lines := subscribe(t, b+"?match=x")
	publish("hello")
	want(t, lines, "data: hello")
	publish("again")
	lines = subscribe(t, b+"?match=x&last_event_id=earliest")
	want(t, lines, "data: hello")
	want(t, lines, "data: again")
}

// -store redis://... shares the history between hubs: an update published
// on one reaches the subscribers of the other, and is replayed from Redis.
func TestStandalone_RedisStore(t *testing.T) {
	addr := redistest.Addr(t)
	stream := fmt.Sprintf("mercure-test-standalone-%d-%d", os.Getpid(), time.Now().UnixNano())
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() {
		_ = rdb.Del(context.Background(), stream, stream+":ids", stream+":n").Err()
		_ = rdb.Close()
	})
	a, b := twoHubs(t, "redis://"+addr+"/0?stream="+stream)
	publish := func(data string) {
		t.Helper()
		res, err := http.PostForm(a, url.Values{"topic": {"x"}, "data": {data}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("publish %s: %d", data, res.StatusCode)
		}
	}

	lines := subscribe(t, b+"?match=x")
	publish("hello")
	want(t, lines, "data: hello")

	publish("again")
	lines = subscribe(t, b+"?match=x&last_event_id=earliest")
	want(t, lines, "data: hello")
	want(t, lines, "data: again")
}

// subscribe opens a stream at u and returns its lines; the stream is
// closed when the test ends.
func subscribe(t *testing.T, u string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	lines := make(chan string)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		res.Body.Close()
		<-done
	})
	return lines
}

// want reads lines until it gets line, failing after storetest.Deadline.
func want(t *testing.T, lines <-chan string, line string) {
	t.Helper()
	timeout := time.After(storetest.Deadline)
	for {
		select {
		case l := <-lines:
			if l == line {
				return
			}
		case <-timeout:
			t.Fatalf("no %q within %v", line, storetest.Deadline)
		}
	}
}

// health returns the status code and body of GET path.
func health(t *testing.T, base, path string) (int, string) {
	t.Helper()
	res, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// /readyz on -metrics-addr answers 503, saying why, while the hub's store
// feed fails (Redis down), so that a load balancer sends subscribers to
// an instance that works; the public address says nothing of it (issue
// 24: it answered with the store's error, its address included).
func TestStandalone_Readyz(t *testing.T) {
	t.Parallel()
	redisSrv := redistest.Start(t, false)
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-store", "redis://" + redisSrv.Addr + "/0", "-metrics-addr", "127.0.0.1:0"},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	public := httptest.NewServer(s.handler)
	defer public.Close()
	ops := httptest.NewServer(s.metrics)
	defer ops.Close()
	defer s.closeStore()
	defer s.hub.Shutdown(context.Background())
	waitStatus := func(want int) string {
		t.Helper()
		var code int
		var body string
		storetest.WaitFor(t, fmt.Sprintf("/readyz to answer %d", want), func() bool {
			code, body = health(t, ops.URL, "/readyz")
			return code == want
		})
		return body
	}
	waitStatus(http.StatusOK)
	redisSrv.Kill()
	if body := waitStatus(http.StatusServiceUnavailable); !strings.Contains(body, "feed") {
		t.Errorf("/readyz while Redis is down: %q, want the reason", body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := health(t, public.URL, path); code != http.StatusNotFound || strings.Contains(body, redisSrv.Addr) {
			t.Errorf("public %s while Redis is down: %d %q, want 404 and no address", path, code, body)
		}
	}
	redisSrv.Start()
	waitStatus(http.StatusOK)
}

// serveInBackground runs s.serve on a loopback listener, as run does after
// the flags; stop ends it as the signal would, and returns what serve
// returned (failing the test if it does not return).
func serveInBackground(t *testing.T, s *server) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln, slog.New(slog.DiscardHandler)) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("serve did not return after the signal")
			}
		})
		return result
	}
	t.Cleanup(func() { stop() })
	return ln.Addr().String(), stop
}

// A signal while a client holds a request whose body never comes: the
// hub shuts down, cuts that client once the shutdown timeout is over,
// closes the store and reports success.
func TestStandalone_ShutdownWithHungRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-store", "bolt:" + path}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.shutdownTimeout = 200 * time.Millisecond // the default body timeout is far longer
	addr, stop := serveInBackground(t, s)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Expect: 100-continue, so that the answer tells when the hub is
	// reading the body; then part of it, and nothing more.
	fmt.Fprintf(c, "POST /.well-known/mercure HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
		"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n", addr)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("no 100 Continue: %q %v", line, err)
	}
	io.WriteString(c, "topic=x")

	if err := stop(); err != nil {
		t.Errorf("serve after the signal: %v, want nil", err)
	}
	if _, err := io.ReadAll(br); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the held connection: %v, want it closed", err)
	}
	st, err := boltstore.Open(path, boltstore.WithLockTimeout(5*time.Second))
	if err != nil {
		t.Fatalf("the store was not closed: %v", err)
	}
	st.Close()
}

// Keep-alive connections left idle are closed.
func TestStandalone_IdleConnectionsClosed(t *testing.T) {
	s, err := configure([]string{"-addr", "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.idleTimeout = 200 * time.Millisecond
	addr, _ := serveInBackground(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("GET /: %d, close %v; want 200 on a connection kept alive", res.StatusCode, res.Close)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection: %d bytes, %v; want it closed by the hub", n, err)
	}
}

// The limits are flags: past -max-connections a subscriber gets 429 with
// Retry-After, and a limit the library refuses is an error at start.
func TestStandalone_Limits(t *testing.T) {
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-max-connections", "1", "-max-body-bytes", "2048", "-queue-bytes", "4096"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	defer s.hub.Shutdown(context.Background())
	first, err := http.Get(srv.URL + "/.well-known/mercure?match=a")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	second, err := http.Get(srv.URL + "/.well-known/mercure?match=b")
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != http.StatusTooManyRequests || second.Header.Get("Retry-After") == "" {
		t.Fatalf("a second stream past -max-connections 1: %d, Retry-After %q", second.StatusCode, second.Header.Get("Retry-After"))
	}
	if _, err := configure([]string{"-max-body-bytes", "4096", "-queue-bytes", "1024"}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a queue smaller than a body was accepted")
	}
}
