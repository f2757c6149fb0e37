package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/examples/internal/browsertest"
)

// A shared link opens the debugger subscribed as it says (issue 25 item
// 1): every matcher of its URL, match repeated and match_urlpattern, and
// last_event_id, from which the page resumes on load: it replays what
// each matcher selects after that id, nothing else, then goes on live.
func TestDebugger_BrowserSharedLink(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	d := startDebuggerServer(t, "-insecure-publish", "-anonymous", "-debugger")
	publish := func(topic, id, data string) {
		t.Helper()
		res, err := http.PostForm(d.base+mercure.DefaultHubPath, url.Values{"topic": {topic}, "id": {id}, "data": {data}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("publish %s: %s", id, res.Status)
		}
	}
	const (
		first   = "https://example.com/first"
		second  = "https://example.com/second"
		pattern = "https://example.com/books/:id"
	)
	publish(first, "urn:link:before", "before the cursor")
	publish(first, "urn:link:cursor", "at the cursor")
	publish(first, "urn:link:first", "replayed, first matcher")
	publish("https://example.com/books/7", "urn:link:pattern", "replayed, URL pattern")
	publish("https://example.com/unmatched", "urn:link:unmatched", "selected by no matcher")

	q := url.Values{"match": {first, second}, "match_urlpattern": {pattern}, "last_event_id": {"urn:link:cursor"}}
	u := b.newUser(t, "developer")
	u.run("opens a shared link",
		chromedp.Navigate(d.base+mercure.DefaultHubPath+"/debug/?"+q.Encode()),
		browsertest.Contains("#sub-status", "resumed after urn:link:cursor"),
		browsertest.Contains(`#events li[data-id="urn:link:first"]`, "replayed, first matcher"),
		browsertest.Contains(`#events li[data-id="urn:link:pattern"]`, "replayed, URL pattern"))
	publish(second, "urn:link:live", "live, second matcher")
	u.run("gets a live update of its second match", browsertest.Contains(`#events li[data-id="urn:link:live"]`, "live, second matcher"))
	text := u.eval(`document.getElementById("events").innerText`)
	for _, not := range []string{"before the cursor", "at the cursor", "selected by no matcher"} {
		if strings.Contains(text, not) {
			t.Errorf("the list shows %q:\n%s", not, text)
		}
	}
	if got := u.eval(`document.getElementById("last-event-id").value`); got != "urn:link:cursor" {
		t.Errorf("the form's last event id %q, want the link's", got)
	}
}
