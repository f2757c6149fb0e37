package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestStandalone(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-anonymous", "-issuer", "https://issuer.example", "-history", "10"}, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	defer s.hub.Shutdown(context.Background())

	if !strings.Contains(logs.String(), "flag=-anonymous") || !strings.Contains(logs.String(), "flag=-issuer") {
		t.Errorf("no warning for flags not in effect:\n%s", logs.String())
	}

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
	for sc.Scan() && sc.Text() != "" {
		lines = append(lines, sc.Text())
	}
	if want := []string{"id: " + string(id), "data: hello"}; strings.Join(lines, "|") != strings.Join(want, "|") {
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
