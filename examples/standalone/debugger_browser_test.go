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
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/netcut"
	"github.com/mercurekit/mercure/internal/skips"
)

// The debugger, driven in Chromium as a developer would: subscribe from a
// link, see an update published from outside, publish from the page's
// form, watch who is connected and the hub's activity; a second viewer
// without grants sees no private update and no one's payload. Both stream
// modes, tokens and the playground.

// chromium finds a Chromium the test can drive, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	skips.Skip(t, wantChromium) // .ci/run installs it: CI always runs this test
	return ""
}

type step = chromedp.Action[chromedp.Void]

// waitJS polls a JavaScript condition on the page, every 20 ms: polling
// on every animation frame (chromedp's default) has Chromium draw frames
// all along, which cost a third of the CPU time of these tests.
func waitJS(cond string) step {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(20*time.Millisecond))(ctx, t)
		if err != nil {
			err = fmt.Errorf("waiting for %s: %w", cond, err)
		}
		return chromedp.Void{}, err
	}
}

// contains waits until the element matching sel shows text.
func contains(sel, text string) step {
	return waitJS(`(document.querySelector(` + jsString(sel) + `)?.innerText || "").includes(` + jsString(text) + `)`)
}

// script runs JavaScript statements on the page.
func script(js string) step {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](`(() => {`+js+`; return true })()`)(ctx, t)
		return chromedp.Void{}, err
	}
}

// setValue sets a field as a user typing in it would, change event
// included.
func setValue(id, value string) step {
	return script(`const e = document.getElementById(` + jsString(id) + `); e.value = ` + jsString(value) +
		`; e.dispatchEvent(new Event("input")); e.dispatchEvent(new Event("change"))`)
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

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
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("publish %v: %s", form, res.Status)
	}
}

// browser is the package's Chromium; each user gets a context of its
// own (own cookies) from newUser, each page that needs no console
// watching one from newContext.
type browser struct {
	ctx context.Context
}

// shared is the one Chromium of the package's browser tests: started by
// the first of them (a start costs seconds, more than most of these tests
// take), closed by TestMain. Each test opens its pages in browser contexts
// of its own (incognito: no cookie, cache or storage shared), which it
// closes when it ends, so tests sharing it stay independent, and may run
// in parallel.
var shared struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// startBrowser returns the package's Chromium, starting it if it is the
// first call, or skips t when there is none.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromium(t)
	shared.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true), chromedp.WindowSize(1280, 900))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		shared.ctx, shared.cancel = ctx, func() { cancel(); cancelAlloc() }
		shared.err = chromedp.Do(ctx)
	})
	if shared.err != nil {
		t.Fatalf("starting Chromium: %v", shared.err)
	}
	return &browser{ctx: shared.ctx}
}

// closeBrowser closes the package's Chromium, if a test started it.
func closeBrowser() {
	if shared.cancel != nil {
		shared.cancel()
	}
}

// newContext opens a browser context of t's own, with one page, closed
// when t ends; it fails t's steps after timeout.
func (b *browser) newContext(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	t.Cleanup(cancel)
	ctx, cancelContext := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancelContext)
	return ctx
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
	ctx := b.newContext(t, 2*time.Minute)
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

func (u *user) run(what string, steps ...step) {
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
		t.Run(mode.name+"/playground", func(t *testing.T) {
			t.Parallel()
			testDebuggerPlayground(t, b, mode.args)
		})
	}
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
		chromedp.Navigate(page), contains("#sub-status", "connected"))
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:outside"}, "data": {`{"title":"from outside","n":1}`}})
	admin.run("sees the update published from outside, its JSON pretty-printed",
		contains(`#events li[data-id="urn:test:outside"]`, `"title": "from outside"`),
		contains(`#events li[data-id="urn:test:outside"]`, "topics: "+topic))

	admin.run("subscribes again with a token, which also shows who is connected and the activity",
		setValue("sub-token", adminSub), setValue("pub-token", adminPub),
		chromedp.Click(chromedp.CSS("#subscribe")), contains("#sub-status", "connected"),
		contains("#subscribers", `"user": "admin"`), waitJS(`document.querySelector('[data-series="published"]') !== null`))

	admin.run("publishes a private update from the form, with every field",
		setValue("pub-topics", topic+"\n"+otherTopic), setValue("pub-data", `{"from":"the form"}`),
		chromedp.Click(chromedp.CSS("#pub-private")), setValue("pub-id", "urn:test:form"), setValue("pub-type", "note"),
		setValue("pub-retry", "250"), chromedp.Click(chromedp.CSS("#publish")),
		contains("#pub-result", "Published: urn:test:form"))
	row := `#events li[data-id="urn:test:form"]`
	admin.run("sees it arrive with its fields",
		contains(row, `"from": "the form"`), contains(row, "note"), contains(row, "retry: 250 ms"),
		contains(row, topic+", "+otherTopic+" (published from this page)"))

	// A second subscriber, from outside, appears in the panel and leaves.
	bob := mint(mercure.Grant{Subject: "bob", Subscribe: []mercure.Match{{Pattern: otherTopic}}, Payload: map[string]string{"user": "bob"}})
	ctx, leave := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+mercure.DefaultHubPath+"?match="+url.QueryEscape(otherTopic), nil)
	req.Header.Set("Authorization", "Bearer "+bob)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("bob subscribes: %v %v", err, res)
	}
	admin.run("sees bob's subscription and payload", contains("#subscribers", otherTopic), contains("#subscribers", `"user": "bob"`))
	leave()
	res.Body.Close()
	admin.run("sees bob leave", waitJS(`!document.getElementById("subscribers").innerText.includes(`+jsString(otherTopic)+`)`))

	// A burst of publishes moves the activity chart.
	before := admin.eval(`document.querySelector('[data-series="published"]').dataset.sum`)
	for i := range 25 {
		d.publish(t, adminPub, url.Values{"topic": {"https://example.com/burst"}, "data": {fmt.Sprint(i)}})
	}
	admin.run("sees the burst in the activity chart",
		waitJS(`Number(document.querySelector('[data-series="published"]').dataset.sum) >= `+before+` + 25`),
		waitJS(`document.querySelector('[data-series="published"] polyline') !== null`),
		waitJS(`Number(document.querySelector('[data-series="streams"]').dataset.peak) >= 2`))

	// The connections cut: the page says so, and resumes after the last
	// event it got, with the retry the form's update set.
	last := admin.eval(`document.querySelector("#events li.event").dataset.id`)
	d.ln.Cut()
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:while-cut"}, "data": {"while cut"}})
	admin.run("sees the stream break and resume",
		contains("#events", "reconnecting in 250 ms with cursor "+last),
		contains("#sub-status", "resumed after "+last+": the hub found it"),
		contains(`#events li[data-id="urn:test:while-cut"]`, "while cut"))

	// A viewer whose token grants another topic only.
	viewerTok := mint(mercure.Grant{Subject: "viewer", Subscribe: []mercure.Match{{Pattern: "https://example.com/viewer-only"}}})
	viewer := b.newUser(t, "viewer")
	viewer.run("subscribes to the same topic with a token that does not grant it",
		chromedp.Navigate(page), setValue("sub-token", viewerTok), chromedp.Click(chromedp.CSS("#subscribe")),
		contains("#sub-status", "connected"),
		contains("#subs-status", "403"), contains("#activity-status", "403"),
		contains("#activity-status", "/.well-known/mercure/debug/activity"))
	d.publish(t, adminPub, url.Values{"topic": {topic}, "private": {"on"}, "id": {"urn:test:secret"}, "data": {"top-secret"}})
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:marker"}, "data": {"public marker"}})
	viewer.run("gets the public update that followed the private one", contains("#events", "public marker"))
	admin.run("gets the private update", contains("#events", "top-secret"))
	if text := viewer.eval(`document.body.innerText`); strings.Contains(text, "top-secret") || strings.Contains(text, `"user"`) {
		t.Errorf("the viewer sees what its token does not grant:\n%s", text)
	}
	if n := viewer.eval(`String(document.querySelectorAll("#subscribers li, [data-series]").length)`); n != "0" {
		t.Errorf("the viewer sees %s subscriptions or activity series", n)
	}

	// A resume: the hub found the cursor, or does not know it.
	viewer.run("resumes after a known id",
		setValue("last-event-id", "urn:test:secret"), chromedp.Click(chromedp.CSS("#subscribe")),
		contains("#sub-status", "resumed after urn:test:secret"), contains("#events", "public marker"))
	viewer.run("resumes after an unknown id",
		setValue("last-event-id", "urn:test:unknown"), chromedp.Click(chromedp.CSS("#subscribe")),
		contains("#sub-status", "does not know the cursor urn:test:unknown"))

	admin.run("pauses the list", chromedp.Click(chromedp.CSS("#pause")), waitJS(`document.getElementById("pause").getAttribute("aria-pressed") === "true"`))
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:paused"}, "data": {"held while paused"}})
	admin.run("holds the event while paused", contains("#pause", "Resume (1 new)"))
	if text := admin.eval(`document.getElementById("events").innerText`); strings.Contains(text, "held while paused") {
		t.Error("an event shows while the list is paused")
	}
	admin.run("resumes the list", chromedp.Click(chromedp.CSS("#pause")), contains("#events", "held while paused"))

	long := `{"items":[` + strings.Repeat(`{"n":1},`, 99) + `{"n":1}]}`
	d.publish(t, adminPub, url.Values{"topic": {topic}, "id": {"urn:test:long"}, "data": {long}})
	admin.run("sees long data folded", contains(`#events li[data-id="urn:test:long"] details:not([open]) summary`, "lines)"))
	d.publish(t, adminPub, url.Values{"topic": {topic}, "data": {strings.Repeat("0123456789", 50)}}) // one long word
	admin.run("filters the events", contains("#events", "0123456789"), setValue("filter", "the form"),
		waitJS(`[...document.querySelectorAll("#events li.event")].filter((li) => !li.hidden).length === 1`),
		setValue("filter", ""))
	keyboard(t, admin)
	narrow(t, admin)
	if screenshot {
		admin.run("shows the page wide", chromedp.EmulateViewport(1280, 900), script(`document.activeElement.blur()`))
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
	u.run("leaves the focus at the top", script(`document.activeElement.blur(); window.scrollTo(0, 0)`))
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
func testDebuggerPlayground(t *testing.T, b *browser, args []string) {
	d := startDebuggerServer(t, append([]string{"-playground", "-subscriptions"}, args...)...)
	dev := b.newUser(t, "developer")
	dev.run("opens the playground subscribed to a topic",
		chromedp.Navigate(d.base+mercure.DefaultHubPath+"/debug/?match="+url.QueryEscape(topic)),
		contains("#playground", "local development only"), contains("#sub-status", "connected"),
		contains("#subs-status", "Live"))
	dev.run("publishes a private update from the form with the playground's token",
		setValue("pub-topics", topic), setValue("pub-data", "hello playground"), chromedp.Click(chromedp.CSS("#pub-private")),
		chromedp.Click(chromedp.CSS("#publish")), contains("#pub-result", "Published: "),
		contains("#events", "hello playground"), contains("#events", "published from this page"),
		waitJS(`Number(document.querySelector('[data-series="published"]')?.dataset.sum) >= 1`))
	d.noTokenInURLs(t)
}
