package mercure_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// SUB-4: streams work over HTTP/2, the protocol browsers use with TLS:
// events are flushed one by one and Shutdown ends the streams cleanly.
func TestSUB4_HTTP2(t *testing.T) {
	t.Parallel()
	// No keep-alive, which would flush an event left in a buffer: each
	// event must arrive on its own flush.
	h, err := mercure.New(testHubURL, mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()

	res, err := client.Get(srv.URL + h.Path() + "?match=" + url.QueryEscape(bookTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != http.StatusOK {
		t.Fatalf("got %s %d, want HTTP/2 200", res.Proto, res.StatusCode)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		if err := sc.Err(); err != nil {
			lines <- "error: " + err.Error() // a reset stream, not a clean end
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				return "<end of stream>"
			}
			return l
		case <-time.After(testwait.Deadline):
			t.Fatal("timed out")
			return ""
		}
	}
	if got := next(); !strings.HasPrefix(got, "id: ") {
		t.Fatalf("the stream starts with %q, want its position", got)
	}
	next() // the blank line that ends the position block
	for i, id := range []string{"h2-1", "h2-2"} {
		if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{bookTopic}, ID: id, Data: "x"}); err != nil {
			t.Fatal(err)
		}
		// Each event arrives before the next is published: it was flushed.
		if got := next(); got != "id: "+id {
			t.Fatalf("event %d: got %q", i, got)
		}
		if got := next(); got != "data: x" {
			t.Fatalf("event %d: got %q", i, got)
		}
		next() // the blank line that ends the event
	}

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "<end of stream>" {
		t.Fatalf("after Shutdown: %q", got)
	}
}
