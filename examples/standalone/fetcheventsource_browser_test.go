package main

import (
	"context"
	"embed"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/examples/internal/browsertest"
	"github.com/mercurekit/mercure/examples/internal/netcut"
	"github.com/mercurekit/mercure/storetest"
)

// fetchEventSourceJS is @microsoft/fetch-event-source's ES module build
// (see its README).
//
//go:embed testdata/fetch-event-source/*.js
var fetchEventSourceJS embed.FS

// fesCookie is the -cookie of the fetch-event-source test: the native
// EventSource, which cannot send a header, presents its token there.
const fesCookie = "mercureToken"

// fesPage subscribes twice to the same topic: with fetch-event-source,
// the token in the Authorization header (why applications use it), and
// with the browser's EventSource, the token in the cookie. The page
// records what each client's onmessage gets (got), and for
// fetch-event-source the responses' Mercure-Last-Event-ID, how often
// onclose and onerror ran, and the raw bytes of each connection: its
// fetch is the browser's, through a TransformStream that copies the bytes
// as they pass, unchanged. It also keeps the updates apart (updates) by
// the rule docs/embedding.md gives for applications that publish updates
// without data: the first message after a response without
// Mercure-Last-Event-ID (a stream that did not resume) is the position.
// onclose throws, as fetch-event-source's README advises, so that a
// stream the hub ends is reconnected too: otherwise fetch-event-source
// stops for good there. openWhenHidden keeps the stream open whatever
// Chromium says of the page's visibility (by default fetch-event-source
// closes it while the tab is hidden).
const fesPage = `<!doctype html>
<script type="module">
import {fetchEventSource} from "/fes/index.js";
const url = "/.well-known/mercure?match=" + encodeURIComponent("https://example.com/books/1");
window.fes = {got: [], updates: [], opens: [], closes: 0, errors: [], raw: []};
window.fes.keepAlives = (i) => window.fes.raw[i].split("\n").filter((l) => l === ":").length;
const copying = (input, init) => fetch(input, init).then((res) => {
  const i = window.fes.raw.push("") - 1, dec = new TextDecoder();
  const body = res.body.pipeThrough(new TransformStream({transform(chunk, out) {
    window.fes.raw[i] += dec.decode(chunk, {stream: true});
    out.enqueue(chunk);
  }}));
  return new Response(body, {status: res.status, statusText: res.statusText, headers: res.headers});
});
let atPosition = false;
fetchEventSource(url, {
  headers: {Authorization: "Bearer " + TOKEN},
  openWhenHidden: true,
  fetch: copying,
  onopen(res) {
    window.fes.opens.push({status: res.status, resumedFrom: res.headers.get("Mercure-Last-Event-ID")});
    atPosition = !res.headers.has("Mercure-Last-Event-ID");
  },
  onmessage(ev) {
    window.fes.got.push({id: ev.id, data: ev.data});
    if (atPosition) { atPosition = false; return; }
    window.fes.updates.push({id: ev.id, data: ev.data});
  },
  onclose() { window.fes.closes++; throw new Error("the hub ended the stream"); },
  onerror(err) { window.fes.errors.push(String(err)); },
});
window.es = {got: [], opens: 0};
const es = new EventSource(url);
es.onopen = () => { window.es.opens++; };
es.onmessage = (e) => { window.es.got.push({id: e.lastEventId, data: e.data}); };
</script>`

// fesMessage is what a client's onmessage got: the message's id (an
// EventSource's lastEventId) and data.
type fesMessage struct {
	ID   string `json:"id"`
	Data string `json:"data"`
}

// fesStream is a stream request held by the page's server until the test
// releases it.
type fesStream struct {
	lastEventID, auth string
	release           chan struct{}
}

// The real @microsoft/fetch-event-source in Chromium, beside the
// browser's EventSource on the same page, hub and topic (issue 41 item 7).
// fetch-event-source dispatches every block that an empty line ends, data
// or not: a stream opened without Last-Event-ID brings its onmessage one
// message with empty data, first, whose id is the hub's position when the
// stream opened (the id-only block that sets an EventSource's last event
// id without an event), and nothing else that is not an update: not the
// keep-alives (at least 3 pass on its first connection, counted in its
// bytes), not the end of a stream. A stream that resumes with
// Last-Event-ID starts with its replay, with no such message. An update
// without data is a message with empty data too. The EventSource gets
// the updates only.
//
// Both resume exactly: after a network cut following three updates, each
// reconnects with the last update's id as Last-Event-ID, and after the
// hub ends streams opened afresh before any update (EndStreams), each
// reconnects with the position. Each reconnection is held until an update
// is published, so that only a replay can deliver it; each client gets
// it, once. Both stream engines.
func TestBrowser_FetchEventSource(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	for _, mode := range []struct {
		name string
		args []string
	}{{"detached", nil}, {"goroutine", []string{"-goroutine-streams"}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testFetchEventSource(t, b, mode.name, mode.args)
		})
	}
}

func testFetchEventSource(t *testing.T, b *browser, name string, args []string) {
	const bookTopic = "https://example.com/books/1"
	ln := mustListen(t)
	hubURL := "http://" + ln.Addr().String() + mercure.DefaultHubPath
	key, jwks := newSigningKey(t)
	// Keep-alives every 100 ms, so that several pass while the page waits.
	s, err := configure(append([]string{"-addr", ln.Addr().String(), "-issuer", testIssuer, "-subscriber-jwks", jwks,
		"-cookie", fesCookie, "-keep-alive", "100ms"}, args...), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	token := signToken(t, key, hubURL, "subscribe", bookTopic, nil)

	// The page's server holds every stream request until the test has
	// seen it and releases it; fetch-event-source's are those with an
	// Authorization header.
	streams := map[string]chan fesStream{"fetch-event-source": make(chan fesStream), "EventSource": make(chan fesStream)}
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: fesCookie, Value: token, Path: mercure.DefaultHubPath, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		w.Write([]byte(strings.Replace(fesPage, "TOKEN", browsertest.JSString(token), 1)))
	})
	mux.HandleFunc("GET /fes/{file}", func(w http.ResponseWriter, r *http.Request) {
		// index.js imports ./fetch, which imports ./parse: each file is
		// served with and without .js.
		js, err := fetchEventSourceJS.ReadFile(path.Join("testdata/fetch-event-source", strings.TrimSuffix(r.PathValue("file"), ".js")+".js"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(js)
	})
	mux.HandleFunc(mercure.DefaultHubPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			client := "EventSource"
			if r.Header.Get("Authorization") != "" {
				client = "fetch-event-source"
			}
			st := fesStream{r.Header.Get("Last-Event-ID"), r.Header.Get("Authorization"), make(chan struct{})}
			select {
			case streams[client] <- st:
			case <-r.Context().Done():
				return
			case <-done:
				return
			}
			select {
			case <-st.release:
			case <-r.Context().Done():
				return
			case <-done:
				return
			}
		}
		s.handler.ServeHTTP(w, r)
	})
	front := httptest.NewUnstartedServer(mux)
	front.Listener.Close()
	cl := &netcut.Listener{Listener: ln} // streams taken over from net/http are cut too
	front.Listener = cl
	front.Start()
	t.Cleanup(front.Close)
	t.Cleanup(func() { s.hub.Shutdown(context.Background()) }) // before: it ends the streams that front.Close waits for
	t.Cleanup(func() { close(done) })                          // before all: held requests would hold front.Close

	u := b.newUser(t, name) // closed first
	next := func(client, what string) fesStream {
		t.Helper()
		select {
		case st := <-streams[client]:
			return st
		case <-time.After(storetest.Deadline):
			t.Fatalf("%s did not connect (%s)", client, what)
		case <-u.ctx.Done():
			t.Fatalf("%s did not connect (%s): %v", client, what, u.ctx.Err())
		}
		return fesStream{}
	}
	// connect takes the next stream request of each client, checks that
	// it resumes from lastEventID ("" for none) and returns them.
	connect := func(what, lastEventID string) []fesStream {
		t.Helper()
		var held []fesStream
		for _, client := range []string{"fetch-event-source", "EventSource"} {
			st := next(client, what)
			if st.lastEventID != lastEventID {
				t.Fatalf("%s: %s connected with Last-Event-ID %q, want %q", what, client, st.lastEventID, lastEventID)
			}
			if client == "fetch-event-source" && st.auth != "Bearer "+token {
				t.Fatalf("%s: fetch-event-source connected with Authorization %q", what, st.auth)
			}
			held = append(held, st)
		}
		return held
	}
	release := func(held []fesStream) {
		for _, st := range held {
			close(st.release)
		}
	}
	publish := func(data string) string {
		t.Helper()
		id, err := s.hub.Publish(context.Background(), mercure.Update{Topics: []string{bookTopic}, Data: data, Private: true})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	// arrived waits until both clients got the update whose data is data.
	arrived := func(data string) browsertest.Step {
		some := `.got.some((m) => m.data === ` + browsertest.JSString(data) + `)`
		return browsertest.WaitJS(`window.fes` + some + ` && window.es` + some)
	}
	// got fails t unless the messages that the page recorded in js are
	// want.
	got := func(what, js string, want ...fesMessage) {
		t.Helper()
		var msgs []fesMessage
		if err := json.Unmarshal([]byte(u.eval(`JSON.stringify(`+js+`)`)), &msgs); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(msgs, want) {
			t.Fatalf("%s: %s = %+v, want %+v", what, js, msgs, want)
		}
	}

	// A fresh stream starts at the hub's position: after "before", which it
	// does not get.
	publish("before")
	pos := s.hub.LastEventID()
	u.run("opens the page", chromedp.Navigate(front.URL+"/")) // its streams wait, below
	release(connect("the page opens", ""))
	u.run("opens, and several keep-alives pass", browsertest.WaitJS(`window.fes.opens.length === 1 && window.es.opens === 1 && window.fes.keepAlives(0) >= 3`))
	if raw := u.eval(`window.fes.raw[0]`); !strings.HasPrefix(raw, "id: "+pos+"\n\n") {
		t.Fatalf("the first stream starts with %q, want its position %q", raw, pos)
	}
	// What onmessage got is checked once an update that follows arrives:
	// each client parses its stream in order.
	// The second update has no data: it comes as a message with empty
	// data too, which only its place tells from the position.
	first, empty, second := fesMessage{publish("first"), "first"}, fesMessage{publish(""), ""}, fesMessage{publish("second"), "second"}
	u.run("gets three updates", arrived("second"))
	position := fesMessage{ID: pos}
	got("updates after keep-alives", "window.fes.got", position, first, empty, second)
	got("updates after keep-alives", "window.fes.updates", first, empty, second)
	got("updates after keep-alives", "window.es.got", first, empty, second)

	// A network failure: each client resumes after the last update.
	cl.Cut()
	held := connect("after a cut", second.ID)
	away := fesMessage{publish("while away"), "while away"}
	release(held)
	u.run("resumes after a cut", arrived(away.Data))
	got("resumed after a cut", "window.fes.got", position, first, empty, second, away)
	got("resumed after a cut", "window.fes.updates", first, empty, second, away)
	got("resumed after a cut", "window.es.got", first, empty, second, away)
	if from := u.eval(`window.fes.opens.map((o) => o.status + " " + o.resumedFrom).join(",")`); from != "200 null,200 "+second.ID {
		t.Fatalf("fetch-event-source's responses (status, Mercure-Last-Event-ID): %s", from)
	}

	// fetch-event-source reports a network failure to onerror, not onclose.
	if ends := u.eval(`window.fes.closes + " " + window.fes.errors.length`); ends != "0 1" {
		t.Fatalf("after a cut, fetch-event-source's onclose and onerror ran %s times, want 0 1", ends)
	}

	// A page opened afresh, whose streams the hub ends before any update:
	// each client resumes from the position, the only id it got.
	if pos = s.hub.LastEventID(); pos != away.ID {
		t.Fatalf("the hub's position %q, want the last update's %q", pos, away.ID)
	}
	u.run("reloads", chromedp.Reload())
	release(connect("after a reload", ""))
	u.run("opens again", browsertest.WaitJS(`window.fes.opens.length === 1 && window.es.opens === 1`))
	if err := s.hub.EndStreams(context.Background(), mercure.StreamFilter{Subject: "app"}); err != nil {
		t.Fatal(err)
	}
	held = connect("after the hub ended the streams", pos)
	again := fesMessage{publish("while away again"), "while away again"}
	release(held)
	u.run("resumes from the position", arrived(again.Data))
	position = fesMessage{ID: pos}
	got("resumed from the position", "window.fes.got", position, again)
	got("resumed from the position", "window.fes.updates", again)
	got("resumed from the position", "window.es.got", again)
	// The hub's end reaches onclose, whose error onerror gets.
	if ends := u.eval(`window.fes.closes + " " + window.fes.errors.join(",")`); ends != "1 Error: the hub ended the stream" {
		t.Fatalf("after the hub's end, fetch-event-source's onclose ran, and onerror got: %s; want 1, the error onclose threw", ends)
	}
}
