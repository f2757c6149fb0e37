package main

import (
	"context"
	_ "embed"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/examples/internal/browsertest"
	"github.com/mercurekit/mercure/examples/internal/netcut"
)

//go:embed testdata/event-source-polyfill/eventsource.min.js
var polyfillJS string

// polyfillPage subscribes the way API Platform's and Symfony's front ends
// do with event-source-polyfill: topic= with a URI template, the token in
// the Authorization header (which EventSource cannot send), the
// polyfill's default settings otherwise.
const polyfillPage = `<!doctype html>
<script src="/polyfill.js"></script>
<script>
window.got = [];
const es = new EventSourcePolyfill(location.origin + "/.well-known/mercure?topic=" + encodeURIComponent("https://example.com/books/{id}"),
  {headers: {Authorization: "Bearer " + decodeURIComponent(location.hash.slice(1))}});
es.onopen = () => { window.opened = (window.opened || 0) + 1; };
es.onmessage = (e) => { window.got.push(e.data); };
</script>`

// The real event-source-polyfill in Chromium: after the server cuts its
// stream, it reconnects with lastEventId in the query, and the hub replays
// the update published meanwhile (held back until it is, so that only a
// replay can deliver it).
func TestBrowser_EventSourcePolyfillResumes(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	jwks := secretJWKS(t, symfonySecret)
	s, err := configure([]string{"-addr", ln.Addr().String(), "-issuer", "https://app.example",
		"-publisher-jwks", jwks, "-subscriber-jwks", jwks, "-legacy-clients"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	resumed := make(chan url.Values, 1)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(polyfillPage)) })
	mux.HandleFunc("GET /polyfill.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write([]byte(polyfillJS))
	})
	mux.HandleFunc("/.well-known/mercure", func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Has("lastEventId") {
			select {
			case resumed <- q:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		s.handler.ServeHTTP(w, r)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	cl := &netcut.Listener{Listener: ln} // streams taken over from net/http are cut too
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { s.hub.Shutdown(context.Background()) }) // before: it ends the streams that srv.Close waits for

	ctx := b.Context(t, 60*time.Second) // closed before the hub shuts down
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	publish := func(topic, data string) string {
		t.Helper()
		id, err := s.hub.Publish(context.Background(), mercure.Update{Topics: []string{topic}, Data: data, Private: true})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}

	token := legacySubscriberToken(symfonySecret)
	run("open the page", chromedp.Navigate(srv.URL+"/#"+url.QueryEscape(token)), browsertest.WaitJS(`window.opened === 1`))
	first := publish("https://example.com/books/1", "first")
	run("the first update arrives", browsertest.WaitJS(`window.got.includes("first")`))

	cl.Cut()
	var q url.Values
	select {
	case q = <-resumed:
	case <-ctx.Done():
		t.Fatal("the polyfill did not reconnect with lastEventId")
	}
	if q.Get("lastEventId") != first || q.Get("topic") != "https://example.com/books/{id}" {
		t.Fatalf("reconnected with %v", q)
	}
	publish("https://example.com/books/2", "while away")
	close(release)
	run("the update published during the cut arrives, once", browsertest.WaitJS(`window.got.join(",") === "first,while away"`))
}
