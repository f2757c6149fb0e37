package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/examples/internal/browsertest"
	"github.com/mercurekit/mercure/examples/internal/netcut"
)

// The debugger, driven in Chromium as a developer would: subscribe from a
// link, see an update published from outside, publish from the page's
// form, watch who is connected and the hub's activity; a second viewer
// without grants sees no private update and no one's payload. Both stream
// modes, tokens and the playground.

// debuggerServer is the standalone on a real port of 127.0.0.1, so that
// the browser reaches it at its hub URL's origin, and the paths of the
// requests it got.
type debuggerServer struct {
	*server
	base string // http://127.0.0.1:PORT
	ln   *netcut.Listener

	mu   sync.Mutex
	uris []string
}

func startDebuggerServer(t *testing.T, args ...string) *debuggerServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := configure(append([]string{"-addr", ln.Addr().String()}, args...), slog.New(slog.DiscardHandler))
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	d := &debuggerServer{server: s, base: "http://" + ln.Addr().String(), ln: &netcut.Listener{Listener: ln}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.uris = append(d.uris, r.RequestURI)
		d.mu.Unlock()
		s.handler.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = d.ln
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.hub.Shutdown(ctx)
		srv.Close()
	})
	return d
}

// noTokenInURLs fails the test if a request URI held a JWT.
func (d *debuggerServer) noTokenInURLs(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.uris) == 0 {
		t.Fatal("no request recorded")
	}
	if i := slices.IndexFunc(d.uris, func(u string) bool { return strings.Contains(u, "eyJ") }); i >= 0 {
		t.Errorf("a token in a URL: %.120s…", d.uris[i])
	}
}

// publish publishes from outside the page, with tok.
func (d *debuggerServer) publish(t *testing.T, tok string, form url.Values) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.base+mercure.DefaultHubPath, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := onceClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("publish %v: %s", form, res.Status)
	}
}

// onceClient opens a connection per request: the tests cut every
// connection to the hub (d.ln.Cut), and a POST sent on a pooled one that
// the cut closed fails with EOF (net/http does not send a POST again),
// as it did once in CI, beside two CPU hogs.
var onceClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// chrome is the package's Chromium, closed by TestMain.
var chrome = &browsertest.Browser{Width: 1280, Height: 900}

// browser is the package's Chromium; each user gets a context of its
// own (own cookies) from newUser, each page that needs no console
// watching one from Context.
type browser struct{ *browsertest.Browser }

// startBrowser returns the package's Chromium, starting it if no test did
// yet, or skips t when there is none.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	chrome.Start(t)
	return &browser{chrome}
}

// user is one browser context, whose console is watched for exceptions
// and policy violations.
type user struct {
	t    *testing.T
	name string
	ctx  context.Context

	mu       sync.Mutex
	problems []string
}

func (b *browser) newUser(t *testing.T, name string) *user {
	ctx := b.Context(t, 2*time.Minute)
	u := &user{t: t, name: name, ctx: ctx}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			// Refused requests show as network errors: the page handles them.
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || (m.Type == chromedp.ConsoleError && m.Source != "network") {
				u.mu.Lock()
				u.problems = append(u.problems, m.String())
				u.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, p := range u.problems {
			t.Errorf("%s's console: %s", name, p)
		}
	})
	return u
}

func (u *user) run(what string, steps ...browsertest.Step) {
	u.t.Helper()
	if err := chromedp.Do(u.ctx, steps...); err != nil {
		u.t.Fatalf("%s %s: %v", u.name, what, err)
	}
}

func (u *user) eval(expr string) string {
	u.t.Helper()
	v, err := chromedp.Run(u.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		u.t.Fatalf("%s: %s: %v", u.name, expr, err)
	}
	return v
}

const (
	topic      = "https://example.com/books/1"
	otherTopic = "https://example.com/elsewhere"
)

func TestDebugger_Browser(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	for _, mode := range []struct {
		name string
		args []string
	}{{"detached", nil}, {"goroutine", []string{"-goroutine-streams"}}} {
		t.Run(mode.name+"/tokens", func(t *testing.T) {
			t.Parallel()
			testDebuggerTokens(t, b, mode.args, mode.args == nil && os.Getenv("DEBUGGER_SCREENSHOT") != "")
		})
	}
	// The playground is the page's and the standalone's: nothing in it
	// depends on the stream engine, whose part (a stream that subscribes,
	// breaks and resumes, a subscriber who leaves) the tokens test drives
	// in both.
	t.Run("playground", func(t *testing.T) {
		t.Parallel()
		testDebuggerPlayground(t, b)
	})
}

// testDebuggerTokens drives the debugger of a hub that verifies tokens.
func testDebuggerTokens(t *testing.T, b *browser, args []string, screenshot bool) {
	key, file := newSigningKey(t)
	d := startDebuggerServer(t, append([]string{"-issuer", testIssuer, "-publisher-jwks", file, "-subscriber-jwks", file,
		"-anonymous", "-subscriptions", "-debugger"}, args...)...)
	signer, err := mercure.NewSigner(key, testIssuer, d.hub.URL())
	if err != nil {
		t.Fatal(err)
	}
	mint := func(g mercure.Grant) string {
		t.Helper()
		tok, err := signer.Token(g)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	all := []mercure.Match{{Pattern: "*"}}
	adminSub := mint(mercure.Grant{Subject: "admin", Subscribe: all, Payload: map[string]string{"user": "admin"}})
	adminPub := mint(mercure.Grant{Subject: "admin", Publish: all})
	page := d.base + mercure.DefaultHubPath + "/debug/?match=" + url.QueryEscape(topic)

	admin := b.newUser(t, "admin")
	admin.run("opens a link to the debugger subscribed to a topic",
		chromedp.Navigate(page), browsertest.Contains("#sub-status", "connected"))
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:outside"}, "data": {`{"title":"from outside","n":1}`}})
	admin.run("sees the update published from outside, its JSON pretty-printed",
		browsertest.Contains(`#events li[data-id="urn:test:outside"]`, `"title": "from outside"`),
		browsertest.Contains(`#events li[data-id="urn:test:outside"]`, "topics: "+topic))

	admin.run("subscribes again with a token, which also shows who is connected and the activity",
		browsertest.SetValue("sub-token", adminSub), browsertest.SetValue("pub-token", adminPub),
		chromedp.Click(chromedp.CSS("#subscribe")), browsertest.Contains("#sub-status", "connected"),
		browsertest.Contains("#subscribers", `"user": "admin"`), browsertest.WaitJS(`document.querySelector('[data-series="published"]') !== null`))

	admin.run("publishes a private update from the form, with every field",
		browsertest.SetValue("pub-topics", topic+"\n"+otherTopic), browsertest.SetValue("pub-data", `{"from":"the form"}`),
		chromedp.Click(chromedp.CSS("#pub-private")), browsertest.SetValue("pub-id", "urn:test:form"), browsertest.SetValue("pub-type", "note"),
		browsertest.SetValue("pub-retry", "250"), chromedp.Click(chromedp.CSS("#publish")),
		browsertest.Contains("#pub-result", "Published: urn:test:form"))
	row := `#events li[data-id="urn:test:form"]`
	admin.run("sees it arrive with its fields",
		browsertest.Contains(row, `"from": "the form"`), browsertest.Contains(row, "note"), browsertest.Contains(row, "retry: 250 ms"),
		browsertest.Contains(row, topic+", "+otherTopic+" (published from this page)"))

	// A second subscriber, from outside, appears in the panel and leaves.
	bob := mint(mercure.Grant{Subject: "bob", Subscribe: []mercure.Match{{Pattern: otherTopic}}, Payload: map[string]string{"user": "bob"}})
	ctx, leave := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+mercure.DefaultHubPath+"?match="+url.QueryEscape(otherTopic), nil)
	req.Header.Set("Authorization", "Bearer "+bob)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("bob subscribes: %v %v", err, res)
	}
	admin.run("sees bob's subscription and payload", browsertest.Contains("#subscribers", otherTopic), browsertest.Contains("#subscribers", `"user": "bob"`))
	leave()
	res.Body.Close()
	admin.run("sees bob leave", browsertest.WaitJS(`!document.getElementById("subscribers").innerText.includes(`+browsertest.JSString(otherTopic)+`)`))

	// A burst of publishes moves the activity chart.
	before := admin.eval(`document.querySelector('[data-series="published"]').dataset.sum`)
	for i := range 25 {
		d.publish(t, adminPub, url.Values{"topic": {"https://example.com/burst"}, "data": {fmt.Sprint(i)}})
	}
	admin.run("sees the burst in the activity chart",
		browsertest.WaitJS(`Number(document.querySelector('[data-series="published"]').dataset.sum) >= `+before+` + 25`),
		browsertest.WaitJS(`document.querySelector('[data-series="published"] polyline') !== null`),
		browsertest.WaitJS(`Number(document.querySelector('[data-series="streams"]').dataset.peak) >= 2`))

	// The connections cut: the page says so, and resumes after the last
	// event it got, with the retry the form's update set.
	last := admin.eval(`document.querySelector("#events li.event").dataset.id`)
	d.ln.Cut()
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:while-cut"}, "data": {"while cut"}})
	admin.run("sees the stream break and resume",
		browsertest.Contains("#events", "reconnecting in 250 ms with cursor "+last),
		browsertest.Contains("#sub-status", "resumed after "+last+": the hub found it"),
		browsertest.Contains(`#events li[data-id="urn:test:while-cut"]`, "while cut"))

	// A viewer whose token grants another topic only.
	viewerTok := mint(mercure.Grant{Subject: "viewer", Subscribe: []mercure.Match{{Pattern: "https://example.com/viewer-only"}}})
	viewer := b.newUser(t, "viewer")
	viewer.run("subscribes to the same topic with a token that does not grant it",
		chromedp.Navigate(page), browsertest.SetValue("sub-token", viewerTok), chromedp.Click(chromedp.CSS("#subscribe")),
		browsertest.Contains("#sub-status", "connected"),
		browsertest.Contains("#subs-status", "403"), browsertest.Contains("#activity-status", "403"),
		browsertest.Contains("#activity-status", "/.well-known/mercure/debug/activity"))
	d.publish(t, adminPub, url.Values{"topic": {topic}, "private": {"on"}, "id": {"urn:test:secret"}, "data": {"top-secret"}})
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:marker"}, "data": {"public marker"}})
	viewer.run("gets the public update that followed the private one", browsertest.Contains("#events", "public marker"))
	admin.run("gets the private update", browsertest.Contains("#events", "top-secret"))
	if text := viewer.eval(`document.body.innerText`); strings.Contains(text, "top-secret") || strings.Contains(text, `"user"`) {
		t.Errorf("the viewer sees what its token does not grant:\n%s", text)
	}
	if n := viewer.eval(`String(document.querySelectorAll("#subscribers li, [data-series]").length)`); n != "0" {
		t.Errorf("the viewer sees %s subscriptions or activity series", n)
	}

	// A resume: the hub found the cursor, or does not know it.
	viewer.run("resumes after a known id",
		browsertest.SetValue("last-event-id", "urn:test:secret"), chromedp.Click(chromedp.CSS("#subscribe")),
		browsertest.Contains("#sub-status", "resumed after urn:test:secret"), browsertest.Contains("#events", "public marker"))
	viewer.run("resumes after an unknown id",
		browsertest.SetValue("last-event-id", "urn:test:unknown"), chromedp.Click(chromedp.CSS("#subscribe")),
		browsertest.Contains("#sub-status", "does not know the cursor urn:test:unknown"))

	admin.run("pauses the list", chromedp.Click(chromedp.CSS("#pause")), browsertest.WaitJS(`document.getElementById("pause").getAttribute("aria-pressed") === "true"`))
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:paused"}, "data": {"held while paused"}})
	admin.run("holds the event while paused", browsertest.Contains("#pause", "Resume (1 new)"))
	if text := admin.eval(`document.getElementById("events").innerText`); strings.Contains(text, "held while paused") {
		t.Error("an event shows while the list is paused")
	}
	admin.run("resumes the list", chromedp.Click(chromedp.CSS("#pause")), browsertest.Contains("#events", "held while paused"))

	long := `{"items":[` + strings.Repeat(`{"n":1},`, 99) + `{"n":1}]}`
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:long"}, "data": {long}})
	admin.run("sees long data folded", browsertest.Contains(`#events li[data-id="urn:test:long"] details:not([open]) summary`, "lines)"))
	d.publish(t, adminPub, url.Values{"topic": {topic}, "data": {strings.Repeat("0123456789", 50)}}) // one long word
	admin.run("filters the events", browsertest.Contains("#events", "0123456789"), browsertest.SetValue("filter", "the form"),
		browsertest.WaitJS(`[...document.querySelectorAll("#events li.event")].filter((li) => !li.hidden).length === 1`),
		browsertest.SetValue("filter", ""))
	keyboard(t, admin)
	narrow(t, admin)
	if screenshot {
		admin.run("shows the page wide", chromedp.EmulateViewport(1280, 900), browsertest.Script(`document.activeElement.blur()`))
		png, err := chromedp.Run(admin.ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "debugger.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.noTokenInURLs(t)
}

// keyboard tabs through the page: every control is reached.
func keyboard(t *testing.T, u *user) {
	t.Helper()
	u.run("leaves the focus at the top", browsertest.Script(`document.activeElement.blur(); window.scrollTo(0, 0)`))
	want := []string{"Matcher", "add-matcher", "last-event-id", "sub-token", "subscribe", "share", "pause", "filter", "clear",
		"pub-topics", "pub-data", "pub-private", "pub-id", "pub-type", "pub-retry", "pub-token", "publish", "subs-reload", "activity-reload"}
	var reached []string
	for range 60 {
		u.run("presses Tab", chromedp.KeyEvent(kb.Tab))
		reached = append(reached, u.eval(`document.activeElement.id || document.activeElement.getAttribute("aria-label") || document.activeElement.tagName`))
	}
	for _, w := range want {
		if !slices.Contains(reached, w) {
			t.Errorf("Tab never reaches %s; it reaches %q", w, reached)
		}
	}
}

// narrow shows the page 400 px wide: nothing overflows sideways.
func narrow(t *testing.T, u *user) {
	t.Helper()
	u.run("opens the page 400 px wide", chromedp.EmulateViewport(400, 800))
	if got := u.eval(`const r = document.documentElement; r.scrollWidth > r.clientWidth ? r.scrollWidth + " > " + r.clientWidth : ""`); got != "" {
		t.Errorf("at 400 px, the page scrolls sideways: scroll width %s", got)
	}
	wide := u.eval(`[...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)` +
		`.map((e) => e.tagName + "#" + e.id + "." + e.getAttribute("class")).slice(0, 5).join(", ")`)
	if wide != "" {
		t.Errorf("at 400 px, elements past the right edge: %s", wide)
	}
}

// testDebuggerPlayground drives the playground: no token to mint.
func testDebuggerPlayground(t *testing.T, b *browser) {
	d := startDebuggerServer(t, "-playground", "-subscriptions")
	dev := b.newUser(t, "developer")
	dev.run("opens the playground subscribed to a topic",
		chromedp.Navigate(d.base+mercure.DefaultHubPath+"/debug/?match="+url.QueryEscape(topic)),
		browsertest.Contains("#playground", "local development only"), browsertest.Contains("#sub-status", "connected"),
		browsertest.Contains("#subs-status", "Live"))
	dev.run("publishes a private update from the form with the playground's token",
		browsertest.SetValue("pub-topics", topic), browsertest.SetValue("pub-data", "hello playground"), chromedp.Click(chromedp.CSS("#pub-private")),
		chromedp.Click(chromedp.CSS("#publish")), browsertest.Contains("#pub-result", "Published: "),
		browsertest.Contains("#events", "hello playground"), browsertest.Contains("#events", "published from this page"),
		browsertest.WaitJS(`Number(document.querySelector('[data-series="published"]')?.dataset.sum) >= 1`))
	d.noTokenInURLs(t)
}
