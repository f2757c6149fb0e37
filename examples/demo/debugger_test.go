package main

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mercurekit/mercure/examples/internal/browsertest"
)

// The board links to the hub's debugger, subscribed to what the board
// subscribes to; the user's session authorizes it as it does the board's
// stream: the debugger shows the board's updates, who is online with
// their payloads, and the hub's activity, with no token to paste.
func TestBrowser_Debugger(t *testing.T) {
	t.Parallel()
	a, srv := startAppAt(t, "localhost")
	ctx := chrome.Context(t, 60*time.Second)
	run := func(what string, steps ...browsertest.Step) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run("alice logs in",
		chromedp.Navigate(a.origin+"/"),
		chromedp.Click(chromedp.CSS(`button[data-user="alice"]`)),
		browsertest.Contains("#status", "live"))
	link, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("debugger").href`))
	if err != nil {
		t.Fatal(err)
	}
	run("alice opens the debugger from the board's link",
		chromedp.Navigate(link),
		browsertest.Contains("#sub-status", "connected"),
		browsertest.Contains("#subscribers", `"user": "alice"`),
		browsertest.WaitJS(`document.querySelector('[data-series="published"]') !== null`))
	cookies := login(t, srv, "bob")
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"Seen in the debugger"}}, cookies, http.StatusCreated).Body.Close()
	run("the debugger shows the board's update", browsertest.Contains("#events", "Seen in the debugger"))
}
