package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/examples/internal/browsertest"
)

// chrome is the package's Chromium, closed by TestMain.
var chrome = &browsertest.Browser{Width: 1100, Height: 700}

// TestBrowser drives two users in two isolated browser contexts: one
// changes data and the other sees it live; a private notification reaches
// only its user; presence shows both; a stream cut by the server resumes
// without losing an update.
func TestBrowser(t *testing.T) {
	t.Parallel()
	// The pages' reconnections (an EventSource's requests that carry
	// Last-Event-ID) wait until back is closed: what is published
	// meanwhile reaches them only by their resume. They lose the page's
	// own last_event_id parameter (the cursor of the page's load, which
	// would replay what they missed too): only the header that
	// EventSource sets can resume them.
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
				q := r.URL.Query()
				q.Del("last_event_id")
				u := *r.URL
				u.RawQuery = q.Encode()
				r = r.Clone(r.Context())
				r.URL = &u
			}
			h.ServeHTTP(w, r)
		})
	}
	// The app's origin is http://localhost:PORT. The hub authorizes the
	// streams with the app's session cookie (no hub cookie).
	a, srv := startAppWith(t, "localhost", holdReconnections)
	t.Cleanup(func() { comeBack.Do(func() { close(back) }) }) // before the server closes
	base := a.origin
	alice := chrome.Context(t, 90*time.Second)
	bob := chrome.Context(t, 90*time.Second)

	run := func(who context.Context, what string, steps ...browsertest.Step) {
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
			browsertest.Contains("#status", "live"))
	}

	run(alice, "alice adds a task",
		chromedp.SendKeys(chromedp.CSS(`#add input[name=title]`), "Buy milk"),
		chromedp.Click(chromedp.CSS(`#add button`)))
	run(bob, "bob sees it without reloading", browsertest.Contains("#tasks", "Buy milk"))

	run(alice, "alice assigns it to bob",
		browsertest.Contains("#task-select", "Buy milk"),
		chromedp.SetValue(chromedp.CSS(`#assign select[name=assignee]`), "bob"),
		chromedp.Click(chromedp.CSS(`#assign button`)))
	run(bob, "bob gets the private notification", browsertest.Contains("#notifications", "Buy milk"))
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
		browsertest.Contains("#tasks", "Marker"))
	run(bob, "bob sees the marker task", browsertest.Contains("#tasks", "Marker"))
	aliceNotes, err := chromedp.Run(alice, chromedp.Text(chromedp.CSS("#notifications")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(aliceNotes, "Buy milk") {
		t.Fatalf("alice got bob's private notification: %q", aliceNotes)
	}
	run(alice, "presence shows both users", browsertest.Contains("#online", "alice"), browsertest.Contains("#online", "bob"))

	// The server cuts every stream; an update published while bob is away
	// (his reconnection held until it is) reaches him when EventSource
	// reconnects with Last-Event-ID.
	cutConnections(srv)
	run(bob, "bob's page shows that it is reconnecting", browsertest.Contains("#status", "reconnecting"))
	cookies := login(t, srv, "carol")
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"While you were away"}}, cookies, http.StatusCreated)
	comeBack.Do(func() { close(back) })
	run(bob, "bob catches up after reconnecting", browsertest.Contains("#tasks", "While you were away"), browsertest.Contains("#status", "live"))

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
	run(bob, "bob gets the script's notification", browsertest.Contains("#notifications", "Hello from a script"))

	if os.Getenv("DEMO_SCREENSHOT") != "" {
		run(alice, "alice sees the last task", browsertest.Contains("#tasks", "While you were away"))
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
	run(bob, "bob logs out", chromedp.Click(chromedp.CSS(`#logout`)), browsertest.Contains("#status", "disconnected"))
	run(alice, "alice no longer sees bob online", browsertest.WaitJS(`!document.querySelector("#online").innerText.includes("bob")`))
}
