package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/storetest"
)

// tlsClient trusts caFile only; h2 chooses HTTP/2 by ALPN, else HTTP/1.1
// alone is offered.
func tlsClient(t *testing.T, caFile string, h2 bool) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// The launch contract's -tls-cert and -tls-key: -addr serves TLS, HTTP/2
// and HTTP/1.1 by ALPN, the default hub URL is https, and a stream on
// each protocol gets what is published.
func TestStandalone_TLS(t *testing.T) {
	dir := t.TempDir()
	ca := writeTLSFiles(t, dir)
	s, err := configure([]string{"-addr", "127.0.0.1:4443", "-anonymous", "-insecure-publish",
		"-tls-cert", filepath.Join(dir, "server.pem"), "-tls-key", filepath.Join(dir, "server-key.pem")}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.hub.URL(), "https://127.0.0.1:4443/.well-known/mercure"; got != want {
		t.Errorf("hub URL %q, want %q", got, want)
	}
	addr, stop := serveInBackground(t, s)
	hub := "https://" + addr + "/.well-known/mercure"
	const topic = "https://example.com/books/1"

	for _, tc := range []struct {
		h2          bool
		proto, alpn string
	}{{true, "HTTP/2.0", "h2"}, {false, "HTTP/1.1", "http/1.1"}} {
		c := tlsClient(t, ca, tc.h2)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hub+"?match="+url.QueryEscape(topic), nil)
		res, err := c.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK || res.Proto != tc.proto || res.TLS == nil || res.TLS.NegotiatedProtocol != tc.alpn {
			t.Errorf("subscribe: %d over %s (ALPN %q), want 200 over %s (%q)", res.StatusCode, res.Proto, res.TLS.NegotiatedProtocol, tc.proto, tc.alpn)
		}
		pub, err := c.PostForm(hub, url.Values{"topic": {topic}, "data": {"over " + tc.proto}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, pub.Body)
		pub.Body.Close()
		if pub.StatusCode != http.StatusOK {
			t.Fatalf("publish over %s: %d", tc.proto, pub.StatusCode)
		}
		got := make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				if sc.Text() == "data: over "+tc.proto {
					got <- nil
					return
				}
			}
			got <- errors.Join(errors.New("stream ended"), sc.Err())
		}()
		select {
		case err := <-got:
			if err != nil {
				t.Errorf("%s: %v", tc.proto, err)
			}
		case <-time.After(storetest.Deadline):
			t.Errorf("%s: no event within %v", tc.proto, storetest.Deadline)
		}
		cancel()
		res.Body.Close()
	}
	// Plain HTTP on the TLS port is refused, not served.
	res, err := http.Get("http://" + addr + "/.well-known/mercure?match=x")
	if err == nil {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d %q, want 400", res.StatusCode, body)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("serve after the signal: %v", err)
	}
}

// The TLS flags are refused clearly when they cannot serve.
func TestStandalone_TLSFlags(t *testing.T) {
	dir := t.TempDir()
	writeTLSFiles(t, dir)
	cert, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	other := t.TempDir()
	writeTLSFiles(t, other)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tls-cert", cert}, "go together"},
		{[]string{"-tls-key", key}, "go together"},
		{[]string{"-tls-cert", filepath.Join(dir, "missing.pem"), "-tls-key", key}, "-tls-cert " + filepath.Join(dir, "missing.pem")},
		{[]string{"-tls-cert", cert, "-tls-key", filepath.Join(other, "server-key.pem")}, "does not match"},
		{[]string{"-tls-cert", key, "-tls-key", key}, "-tls-cert"},
	} {
		s, err := configure(append([]string{"-addr", "127.0.0.1:0"}, tc.args...), slog.New(slog.DiscardHandler))
		if err == nil {
			s.hub.Shutdown(context.Background())
			t.Errorf("%q: accepted", tc.args)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want it to say %q", tc.args, err, tc.want)
		}
	}
}

// A client that opens connections and never completes its TLS handshake
// holds each for the header timeout at most.
func TestStandalone_TLSHandshakeBounded(t *testing.T) {
	dir := t.TempDir()
	writeTLSFiles(t, dir)
	s, err := configure([]string{"-addr", "127.0.0.1:0",
		"-tls-cert", filepath.Join(dir, "server.pem"), "-tls-key", filepath.Join(dir, "server-key.pem")}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.headerTimeout = 200 * time.Millisecond
	addr, _ := serveInBackground(t, s)
	for _, hello := range []string{"", "\x16\x03\x01\x02\x00"} { // nothing; a record header, then nothing
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, hello)
		c.SetReadDeadline(time.Now().Add(storetest.Deadline))
		began := time.Now()
		_, err = io.ReadAll(c)
		c.Close()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a handshake that never came (sent %q) held its connection past %v", hello, storetest.Deadline)
		}
		t.Logf("sent %q: closed after %v", hello, time.Since(began).Round(time.Millisecond))
	}
}
