package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/skips"
)

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

// shared is the one Chromium of the package's browser tests: started by
// the first of them (a start costs seconds, more than these tests take
// otherwise), closed by TestMain. Each test opens its pages in browser
// contexts of its own (incognito: no cookie, cache or storage shared), so
// tests sharing it stay independent, and may run in parallel.
var shared struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// newContext opens, in the package's Chromium (started by the first
// call), a browser context of t's own with one page, closed when t ends;
// it fails t's steps after timeout. It skips t when there is no Chromium.
func newContext(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	exe := chromium(t)
	shared.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true), chromedp.WindowSize(1100, 700))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		shared.ctx, shared.cancel = ctx, func() { cancel(); cancelAlloc() }
		shared.err = chromedp.Do(ctx)
	})
	if shared.err != nil {
		t.Fatalf("starting Chromium: %v", shared.err)
	}
	ctx, cancel := context.WithTimeout(shared.ctx, timeout)
	t.Cleanup(cancel)
	ctx, cancelContext := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancelContext)
	return ctx
}

// closeBrowser closes the package's Chromium, if a test started it.
func closeBrowser() {
	if shared.cancel != nil {
		shared.cancel()
	}
}

type step = chromedp.Action[chromedp.Void]

// waitJS polls a JavaScript condition on the page, every 20 ms: polling
// on every animation frame (chromedp's default) has Chromium draw frames
// all along, which cost a third of the CPU time of these tests.
func waitJS(cond string) step {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(20*time.Millisecond))(ctx, t)
		return chromedp.Void{}, err
	}
}

// contains waits until the element matching sel shows text.
func contains(sel, text string) step {
	return waitJS(`(document.querySelector(` + jsString(sel) + `)?.innerText || "").includes(` + jsString(text) + `)`)
}

func jsString(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// TestBrowser drives two users in two isolated browser contexts: one
// changes data and the other sees it live; a private notification reaches
// only its user; presence shows both; a stream cut by the server resumes
// without losing an update.
func TestBrowser(t *testing.T) {
	t.Parallel()
	// The pages' reconnections (an EventSource's requests that carry
	// Last-Event-ID) wait until back is closed: what is published
	// meanwhile reaches them only by their resume.
	back := make(chan struct{})
	var comeBack sync.Once
	holdReconnections := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Last-Event-ID") != "" {
				select {
				case <-back:
				case <-r.Context().Done():
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	}
	// The app's origin is http://localhost:PORT. The hub authorizes the
	// streams with the app's session cookie (no hub cookie).
	a, srv := startAppWith(t, "localhost", holdReconnections)
	t.Cleanup(func() { comeBack.Do(func() { close(back) }) }) // before the server closes
	base := a.origin
	alice := newContext(t, 90*time.Second)
	bob := newContext(t, 90*time.Second)

	run := func(who context.Context, what string, steps ...step) {
		t.Helper()
		if err := chromedp.Do(who, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for _, u := range []struct {
		ctx  context.Context
		name string
	}{{alice, "alice"}, {bob, "bob"}} {
		run(u.ctx, u.name+" logs in",
			chromedp.Navigate(base+"/"),
			chromedp.Click(chromedp.CSS(`button[data-user="`+u.name+`"]`)),
			contains("#status", "live"))
	}

	run(alice, "alice adds a task",
		chromedp.SendKeys(chromedp.CSS(`#add input[name=title]`), "Buy milk"),
		chromedp.Click(chromedp.CSS(`#add button`)))
	run(bob, "bob sees it without reloading", contains("#tasks", "Buy milk"))

	run(alice, "alice assigns it to bob",
		contains("#task-select", "Buy milk"),
		chromedp.SetValue(chromedp.CSS(`#assign select[name=assignee]`), "bob"),
		chromedp.Click(chromedp.CSS(`#assign button`)))
	run(bob, "bob gets the private notification", contains("#notifications", "Buy milk"))
	// Alice's next update arrives after the notification was published: by
	// then she would have had it, had it leaked.
	// An update the pages ignore (a kind they do not know) sets their
	// EventSources' reconnection time to 100 ms, so that the reconnections
	// below do not wait the default 3 s; the marker task that follows it
	// on the same topic shows that they read it.
	retry := 100 * time.Millisecond
	if _, err := a.hub.Publish(context.Background(), mercure.Update{Topics: []string{a.boardTopic()}, Data: `{"kind":"pace"}`, Retry: &retry}); err != nil {
		t.Fatal(err)
	}
	run(alice, "alice adds a marker task",
		chromedp.SendKeys(chromedp.CSS(`#add input[name=title]`), "Marker"),
		chromedp.Click(chromedp.CSS(`#add button`)),
		contains("#tasks", "Marker"))
	run(bob, "bob sees the marker task", contains("#tasks", "Marker"))
	aliceNotes, err := chromedp.Run(alice, chromedp.Text(chromedp.CSS("#notifications")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(aliceNotes, "Buy milk") {
		t.Fatalf("alice got bob's private notification: %q", aliceNotes)
	}
	run(alice, "presence shows both users", contains("#online", "alice"), contains("#online", "bob"))

	// The server cuts every stream; an update published while bob is away
	// (his reconnection held until it is) reaches him when EventSource
	// reconnects with Last-Event-ID.
	cutConnections(srv)
	run(bob, "bob's page shows that it is reconnecting", contains("#status", "reconnecting"))
	cookies := login(t, srv, "carol")
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"While you were away"}}, cookies, http.StatusCreated)
	comeBack.Do(func() { close(back) })
	run(bob, "bob catches up after reconnecting", contains("#tasks", "While you were away"), contains("#status", "live"))

	// A script notifies bob with an access token: tokens work beside
	// sessions.
	tok, err := a.scriptToken(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, a.hub.URL(), strings.NewReader(url.Values{
		"topic": {a.notificationTopic("bob")}, "private": {"on"},
		"data": {`{"kind":"notification","text":"Hello from a script"}`},
	}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("script publish: %s", res.Status)
	}
	run(bob, "bob gets the script's notification", contains("#notifications", "Hello from a script"))

	if os.Getenv("DEMO_SCREENSHOT") != "" {
		run(alice, "alice sees the last task", contains("#tasks", "While you were away"))
		png, err := chromedp.Run(alice, chromedp.FullScreenshot(100)) // quality 100: PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "demo.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Bob logs out: the hub ends his stream at its next re-check, his
	// page's EventSource is refused when it reconnects, and he leaves
	// alice's presence list.
	run(bob, "bob logs out", chromedp.Click(chromedp.CSS(`#logout`)), contains("#status", "disconnected"))
	run(alice, "alice no longer sees bob online", waitJS(`!document.querySelector("#online").innerText.includes("bob")`))
}
