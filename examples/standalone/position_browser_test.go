package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/examples/internal/browsertest"
	"github.com/mercurekit/mercure/examples/internal/netcut"
)

// positionPage subscribes with the browser's own EventSource.
const positionPage = `<!doctype html>
<script>
window.got = [];
const es = new EventSource("/.well-known/mercure?match=" + encodeURIComponent("https://example.com/books/1"));
es.onopen = () => { window.opened = (window.opened || 0) + 1; };
es.onmessage = (e) => { window.got.push(e.data); };
</script>`

// Chromium's EventSource takes the id-only block a stream starts with as
// its last event id, without firing an event (issue 24 item 2): a stream
// that ends before its first update reconnects with Last-Event-ID set to
// that position, and gets the update published meanwhile (held back
// until it is, so that only a replay can deliver it). Both stream
// engines.
//
// The stream ends as a complete response, as when the hub ends it (a
// queue overflow, EndStreams) or a proxy closes it cleanly. A connection
// reset instead makes Chromium drop the bytes it has received but not yet
// parsed: the block then counts only if the page got to it first, which
// a test cannot observe (onopen fires on the headers, before the body).
func TestBrowser_PositionBeforeFirstEvent(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	for _, mode := range []struct {
		name string
		args []string
	}{{"detached", nil}, {"goroutine", []string{"-goroutine-streams"}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			ln := mustListen(t)
			s, err := configure(append([]string{"-addr", ln.Addr().String(), "-insecure-publish", "-anonymous"}, mode.args...), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			resumed := make(chan string, 1)
			release := make(chan struct{})
			var gets atomic.Int32
			streamConn := make(chan net.Conn, 1) // the first stream's connection
			mux := http.NewServeMux()
			mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(positionPage)) })
			mux.HandleFunc(mercure.DefaultHubPath, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet {
					s.handler.ServeHTTP(w, r)
					return
				}
				if gets.Add(1) == 1 {
					streamConn <- r.Context().Value(connKey{}).(net.Conn)
				} else { // a reconnection
					select {
					case resumed <- r.Header.Get("Last-Event-ID"):
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
			front := httptest.NewUnstartedServer(mux)
			front.Listener.Close()
			front.Listener = ln
			front.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, c)
			}
			front.Start()
			defer front.Close()
			defer s.hub.Shutdown(context.Background()) // first: it ends the streams that front.Close waits for
			var once sync.Once
			releaseOnce := func() { once.Do(func() { close(release) }) }
			defer releaseOnce() // before all: a held reconnection would hold front.Close

			u := b.newUser(t, mode.name)
			u.run("opens the page", chromedp.Navigate(front.URL+"/"), browsertest.WaitJS(`window.opened === 1`))
			// Before any update: the page got the stream's position only. The
			// raw connection, as streams taken over from net/http have no
			// handler left to end them; nothing else is written on it yet.
			// It ends with a chunk that holds a retry field only, which sets
			// no id and fires no event: the reconnection follows within
			// 50 ms, not Chromium's default 3 s.
			c := <-streamConn
			if err := netcut.End(c, []byte(chunk(retryField)+"0\r\n\r\n")); err != nil { // then the last chunk
				t.Fatal(err)
			}
			var lastEventID string
			select {
			case lastEventID = <-resumed:
			case <-u.ctx.Done():
				t.Fatal("EventSource did not reconnect")
			}
			if lastEventID == "" {
				t.Fatal("EventSource reconnected without Last-Event-ID: it did not take the stream's position")
			}
			res, err := http.PostForm(front.URL+mercure.DefaultHubPath, url.Values{"topic": {"https://example.com/books/1"}, "data": {"while away"}})
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			releaseOnce()
			u.run("gets the update published during the cut, once", browsertest.WaitJS(`window.got.join(",") === "while away"`))
		})
	}
}

// retryField sets an EventSource's reconnection time to 50 ms (HTML §
// Interpreting an event stream: the field takes effect as it is read; it
// dispatches no event and leaves the last event id as it was).
const retryField = "retry: 50\n\n"

// chunk frames b as one chunk of a chunked HTTP/1.1 body.
func chunk(b string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(b), b) }

// connKey is the request context key of the connection a request came on.
type connKey struct{}

// mustListen listens on a port of 127.0.0.1.
func mustListen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
