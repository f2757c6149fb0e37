package mercure_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
)

// fillAnonymous opens anonymous streams of one URL pattern each, from
// pattern(0) on, until the hub answers 429 (or max streams are open,
// failing the test); it returns how many it opened.
func fillAnonymous(t *testing.T, th *testHub, pattern func(int) string, max int) int {
	t.Helper()
	for i := 0; ; i++ {
		if i > max {
			t.Fatalf("anonymous clients opened more than %d patterns", max)
		}
		s, res := th.trySubscribe(http.MethodGet, "match_urlpattern="+url.QueryEscape(pattern(i)), "")
		if s == nil {
			if res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("anonymous pattern %q: %d, want 429", pattern(i), res.StatusCode)
			}
			return i
		}
	}
}

// The reproduction of issue 24 item 1 on the per-topic budget, with the
// default limits: anonymous clients spread URL patterns over nested
// prefixes, all evaluated for one topic, until the hub refuses them (at
// half of MaxPatternsPerTopic); a token holder still subscribes to new
// patterns for that topic, up to the whole budget.
func TestBudgets_AnonymousPatternsPerTopicLeaveRoom(t *testing.T) {
	th := startAuthHub(t, mercure.WithAnonymousSubscribers())
	prefixes := []string{
		"https://example.com/",
		"https://example.com/books/",
		"https://example.com/books/x/",
		"https://example.com/books/x/y/",
	}
	anon := 0
	for k, p := range prefixes {
		anon += fillAnonymous(t, th, func(i int) string { return fmt.Sprintf("%s:a/a%d-%d", p, k, i) }, 64)
	}
	// Per prefix, anonymous clients hold at most 32 (half of 64); for the
	// topic https://example.com/books/x/y/1, at most 64 (half of 128).
	if anon != 64 {
		t.Fatalf("anonymous clients hold %d patterns for one topic, want 64 (half of MaxPatternsPerTopic)", anon)
	}
	tok := subToken(t, detail("subscribe", exactTopic("*")))
	deepest := prefixes[len(prefixes)-1]
	held := 0
	for ; held <= 64; held++ {
		q := "match_urlpattern=" + url.QueryEscape(fmt.Sprintf("%s:a/t%d", deepest, held))
		s, res := th.trySubscribe(http.MethodGet, q, "", "Authorization", "Bearer "+tok)
		if s == nil {
			if res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("a token holder's pattern %d: %d", held, res.StatusCode)
			}
			break
		}
	}
	// The rest of the topic's budget (128 - 64) is theirs.
	if held != 64 {
		t.Fatalf("a token holder subscribed to %d new patterns beside the anonymous ones, want 64", held)
	}
}

// The same for the size of all the patterns together: anonymous clients
// stop at half of MaxTotalPatternSize, a token holder goes on.
func TestBudgets_AnonymousPatternSizeLeavesRoom(t *testing.T) {
	th := startAuthHub(t, mercure.WithAnonymousSubscribers(),
		mercure.WithLimits(mercure.Limits{MaxTotalPatternSize: 4000, MaxPatternsPerPrefix: 1000, MaxPatternsPerTopic: 1000}))
	pattern := func(i int) string { return fmt.Sprintf("https://example.com/books/:id/p%d", i) }
	anon := fillAnonymous(t, th, pattern, 1000)
	if anon == 0 {
		t.Fatal("no anonymous pattern accepted")
	}
	tok := subToken(t, detail("subscribe", exactTopic("*")))
	for j := range anon - 1 {
		q := "match_urlpattern=" + url.QueryEscape(pattern(1000+j))
		if s, res := th.trySubscribe(http.MethodGet, q, "", "Authorization", "Bearer "+tok); s == nil {
			t.Fatalf("a token holder's pattern %d beside %d anonymous ones: %d", j, anon, res.StatusCode)
		}
	}
	opened := 0
	for ; opened < anon+2; opened++ {
		q := "match_urlpattern=" + url.QueryEscape(pattern(2000+opened))
		if s, _ := th.trySubscribe(http.MethodGet, q, "", "Authorization", "Bearer "+tok); s == nil {
			break
		}
	}
	if opened > 2 {
		t.Fatalf("token holders opened %d patterns past twice the anonymous share: the whole budget did not hold", anon-1+opened)
	}
}

// A public hub (anonymous readers, a token for the publishers) lets its
// anonymous subscribers hold all but a tenth of its connections, and
// says so at start-up: with half, the default until issue 41, a hub of
// 10 000 connections refused its 5 001st reader, with nothing said. The
// reserve still lets a token holder in once the anonymous share is full.
func TestAnonymousShare_PublicHub(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	th := startAuthHub(t, mercure.WithAnonymousSubscribers(), mercure.WithLimits(mercure.Limits{MaxConnections: 10}),
		mercure.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	var line struct {
		Msg                    string
		Anonymous, Connections int
	}
	for l := range strings.Lines(logs.String()) {
		if json.Unmarshal([]byte(l), &line) == nil && strings.Contains(line.Msg, "MaxAnonymousConnections") {
			break
		}
		line.Msg = ""
	}
	if line.Msg == "" || line.Anonymous != 9 || line.Connections != 10 {
		t.Fatalf("start-up log %q: want the anonymous share, 9 of 10 connections", logs.String())
	}
	for i := range 9 {
		if s, res := th.trySubscribe(http.MethodGet, "match=*", ""); s == nil {
			t.Fatalf("anonymous reader %d: %s, want 200", i+1, res.Status)
		}
	}
	if s, res := th.trySubscribe(http.MethodGet, "match=*", ""); s != nil || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("anonymous reader 10: %v, want 429: the share is full", res.Status)
	}
	tok := mintToken(t, authSubKey, nil, authClaims(detail("subscribe", exactTopic("*"))))
	if s, res := th.trySubscribe(http.MethodGet, "match=*", "", "Authorization", "Bearer "+tok); s == nil {
		t.Fatalf("a token holder beside 9 anonymous readers: %s, want 200 (the reserve)", res.Status)
	}
}
