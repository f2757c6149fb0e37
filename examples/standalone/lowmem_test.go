package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// -low-memory: streams are taken over from net/http (the response says
// Connection: close), and deliver as usual.
func TestStandalone_LowMemory(t *testing.T) {
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-low-memory"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	sub, err := http.Get(srv.URL + "/.well-known/mercure?match=" + url.QueryEscape("https://example.com/books/1"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Body.Close()
	if !sub.Close {
		t.Fatal("the stream's response does not say Connection: close")
	}
	pub, err := http.PostForm(srv.URL+"/.well-known/mercure", url.Values{"topic": {"https://example.com/books/1"}, "data": {"hello"}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := io.ReadAll(pub.Body)
	pub.Body.Close()
	br := bufio.NewReader(sub.Body)
	for _, want := range []string{"id: " + string(id), "data: hello", ""} {
		if line, err := br.ReadString('\n'); err != nil || strings.TrimSuffix(line, "\n") != want {
			t.Fatalf("got %q %v, want %q", line, err, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.hub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after Shutdown: %q %v, want a clean end", rest, err)
	}
}
