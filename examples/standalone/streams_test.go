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

	"github.com/mercurekit/mercure/storetest"
)

// By default (and with -low-memory, kept for compatibility) streams are
// taken over from net/http: the response says Connection: close, and
// they deliver as usual; -goroutine-streams leaves them to net/http.
func TestStandalone_StreamModes(t *testing.T) {
	for _, c := range []struct {
		args  []string
		close bool
	}{{nil, true}, {[]string{"-low-memory"}, true}, {[]string{"-goroutine-streams"}, false}} {
		t.Run(strings.Join(append([]string{"flags"}, c.args...), " "), func(t *testing.T) { testStreamMode(t, c.args, c.close) })
	}
}

func testStreamMode(t *testing.T, args []string, close bool) {
	s, err := configure(append([]string{"-addr", "127.0.0.1:0", "-insecure-publish"}, args...), slog.New(slog.DiscardHandler))
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
	if sub.Close != close {
		t.Fatalf("the stream's response says Connection: close: %v, want %v", sub.Close, close)
	}
	pub, err := http.PostForm(srv.URL+"/.well-known/mercure", url.Values{"topic": {"https://example.com/books/1"}, "data": {"hello"}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := io.ReadAll(pub.Body)
	pub.Body.Close()
	br := bufio.NewReader(sub.Body)
	for _, want := range []string{"id: earliest", "", "id: " + string(id), "data: hello", ""} { // the position, then the update
		if line, err := br.ReadString('\n'); err != nil || strings.TrimSuffix(line, "\n") != want {
			t.Fatalf("got %q %v, want %q", line, err, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), storetest.Deadline)
	defer cancel()
	if err := s.hub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after Shutdown: %q %v, want a clean end", rest, err)
	}
}
