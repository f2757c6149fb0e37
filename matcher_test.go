package mercure_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// Black-box tests of the matcher types (match, match_urlpattern and the
// wildcard, matcher.go): which topics each selects, and the pattern index
// that evaluates them. Requirement IDs in test names are defined in
// docs/requirements.md.

func TestMAT4_WildcardSelectsEveryTopic(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	topics := []string{
		"urn:x",
		"/relative",
		"relative",
		"https://example.com/a",
		"https://other.example/b?c#d",
		"https://exa mple.com/x", // not a URL
		"http://[::1",            // not a URL
		"a%zz",
	}
	for _, q := range []string{"match=*", "match=%2A", "match_exact=*", "match_urlpattern=*", "match_urlpattern=%2A"} {
		for _, topic := range topics {
			t.Run(q+"/"+topic, func(t *testing.T) {
				if !subReceives(t, th, q, topic) {
					t.Errorf("?%s did not receive %q", q, topic)
				}
			})
		}
	}
	// Only the value "*" itself is the wildcard.
	for _, v := range []string{"**", " *", "* ", "%2A%2A"} {
		t.Run("not a wildcard/"+v, func(t *testing.T) {
			if subReceives(t, th, "match="+subEnc(v), "urn:x") {
				t.Errorf("match=%q received urn:x", v)
			}
		})
	}
}

func TestMAT5_ExactIsByteEquality(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	tests := []struct {
		matcher, topic string
		want           bool
	}{
		{"/books/1", "/books/1", true},
		{"/books/1", "https://example.com/books/1", false},
		{"https://example.com/books/1", "/books/1", false},
		{"books/1", "https://example.com/.well-known/books/1", false},
		{"https://Example.com/a", "https://example.com/a", false},
		{"https://example.com/a", "https://Example.com/a", false},
		{"https://example.com/a", "HTTPS://example.com/a", false},
		{"https://example.com/a", "https://example.com:443/a", false},
		{"https://example.com/a", "https://example.com/./a", false},
		{"https://example.com/a/", "https://example.com/a", false},
		{"https://example.com/%7Ea", "https://example.com/~a", false},
		{"https://example.com/%c3%a9", "https://example.com/%C3%A9", false},
		{"https://example.com/é", "https://example.com/%C3%A9", false},
		{"urn:café", "urn:cafe\u0301", false}, // NFC vs NFD: no Unicode normalization
		{"urn:café", "urn:café", true},
		{"urn:X", "urn:x", false},
		{"https://example.com/a%20b", "https://example.com/a b", false},
		{"https://example.com/a b", "https://example.com/a b", true},
		{"https://example.com/a", "https:\\\\example.com\\a", false},
	}
	for _, tt := range tests {
		t.Run(tt.matcher+" vs "+tt.topic, func(t *testing.T) {
			if got := subReceives(t, th, "match="+subEnc(tt.matcher), tt.topic); got != tt.want {
				t.Errorf("match=%q and topic %q: delivered = %v, want %v", tt.matcher, tt.topic, got, tt.want)
			}
		})
	}
}

// matCase is one pattern/topic pair and whether the pattern selects it.
type matCase struct {
	pattern, topic string
	want           bool
}

func runMatCases(t *testing.T, th *testHub, tests []matCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.pattern+" vs "+tt.topic, func(t *testing.T) {
			if got := subReceives(t, th, "match_urlpattern="+subEnc(tt.pattern), tt.topic); got != tt.want {
				t.Errorf("pattern %q and topic %q: delivered = %v, want %v", tt.pattern, tt.topic, got, tt.want)
			}
		})
	}
}

func TestMAT6_RelativePatterns(t *testing.T) {
	t.Parallel()
	runMatCases(t, newTestHub(t), []matCase{
		{"/books/:id", "https://example.com/books/7", true},
		{"/books/:id", "/books/7", true},
		{"/books/:id", "../books/7", true},
		{"/books/:id", "HTTPS://EXAMPLE.COM/books/7", true},
		{"/books/:id", "https:\\\\example.com\\books\\7", true},
		{"/books/:id", "https://example.com:443/books/7", true},
		{"/books/:id", "/a/../books/./7", true},
		{"/books/:id", "https://example.com/books/7?x=1#y", true},
		{"/books/:id", "https://other.example/books/7", false},
		{"/books/:id", "//other.example/books/7", false},
		{"/books/:id", "http://example.com/books/7", false},
		{"/books/:id", "https://example.com:8443/books/7", false},
		{"/books/:id", "https://example.com/books", false},
		{"/books/:id", "urn:books:7", false},
		{"https://example.com/books/:id", "/books/7", true},
		{"https://example.com/books/:id", "https://example.com/books/7", true},
		{"https://other.example/books/:id", "//other.example/books/7", true},
		{"https://other.example/books/:id", "/books/7", false},
		{"books/:id", "https://example.com/.well-known/books/1", true},
		{"books/:id", "books/1", true},
		{"books/:id", "/.well-known/books/1", true},
		{"books/:id", "https://example.com/books/1", false},
		{"books/:id", "/books/1", false},
		{"/books/*", "/books/a/b", true},
		{"/books/:id", "/books/a/b", false},
		{"https://*.example.com/:id", "https://a.example.com/1", true},
		{"https://*.example.com/:id", "/1", false},
	})
}

func TestMAT6_NonSpecialSchemes(t *testing.T) {
	t.Parallel()
	runMatCases(t, newTestHub(t), []matCase{
		{"urn:*", "urn:isbn:1", true},
		{"urn:*", "urn:x", true},
		{"urn:*", "urnx:isbn:1", false},
		{"urn:*", "https://example.com/urn:x", false},
		// A ':' after the scheme must be escaped: "urn:isbn" would be the
		// scheme "urn" followed by a named group.
		{"urn\\:isbn\\:*", "urn:isbn:1", true},
		{"urn\\:isbn\\:*", "urn:issn:1", false},
		{"urn\\:isbn\\::n", "urn:isbn:1", true},
		{"urn\\:isbn\\::n", "urn:issn:1", false},
	})
}

func TestMAT6_HubURLWithPathPrefix(t *testing.T) {
	t.Parallel()
	th := newTestHubAt(t, "https://example.com/app/hub")
	runMatCases(t, th, []matCase{
		{"books/:id", "https://example.com/app/books/1", true},
		{"books/:id", "books/1", true},
		{"books/:id", "/app/books/1", true},
		{"books/:id", "https://example.com/books/1", false},
		{"books/:id", "https://example.com/.well-known/books/1", false},
		{"/books/:id", "https://example.com/books/1", true},
		{"/books/:id", "books/1", false},
		{"../books/:id", "https://example.com/books/1", true},
	})
}

func TestMAT7_CaseSensitivity(t *testing.T) {
	t.Parallel()
	runMatCases(t, newTestHub(t), []matCase{
		{"https://example.com/Books/:id", "/books/1", false},
		{"https://example.com/Books/:id", "/Books/1", true},
		{"/books/:id", "/Books/1", false},
		{"/books/:id", "/BOOKS/1", false},
		{"https://example.com/books/abc", "/books/ABC", false},
		{"https://example.com/books/:id(abc)", "/books/ABC", false},
		{"https://example.com/books/:id(abc)", "/books/abc", true},
		{"https://example.com/books/1?q=a", "/books/1?q=a", true},
		{"https://example.com/books/1?q=a", "/books/1?q=A", false},
		{"https://EXAMPLE.com/books/:id", "https://example.com/books/1", true},
		{"https://EXAMPLE.COM/books/:id", "/books/1", true},
		{"https://example.com/books/:id", "https://EXAMPLE.COM/books/1", true},
		{"HTTPS://example.com/books/:id", "https://example.com/books/1", true},
		{"https://example.com/books/:id", "HTTPS://example.com/books/1", true},
		{"https://ÉXAMPLE.com/books/:id", "https://éxample.com/books/1", true},
		{"https://éxample.com/books/:id", "https://xn--xample-9ua.com/books/1", true},
		{"https://xn--xample-9ua.com/books/:id", "https://Éxample.com/books/1", true},
	})
}

func TestMAT8_UnparsableTopicsNeverMatchPatterns(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	unparsable := []string{"https://exa mple.com/x", "http://[::1", "https://exa%mple.com/x", "http://example.com:99999/x"}
	// Each pattern is broad enough to select a similar, parsable topic (its
	// control), so a miss below is the parse failure, not the pattern.
	controls := map[string]string{
		"https://*/*":  "https://example.com/x",
		"*://*":        "https://example.com/x",
		"*://*/*":      "https://example.com/x",
		"http{s}?://*": "http://example.com/x",
		"https://exa*": "https://example.com/x",
		"http://*":     "http://[::1]/x",
		"/*":           "https://example.com/x",
		"*:*":          "https://example.com/x",
	}
	var patterns []string
	for p, control := range controls {
		patterns = append(patterns, p)
		t.Run("control/"+p, func(t *testing.T) {
			if !subReceives(t, th, "match_urlpattern="+subEnc(p), control) {
				t.Errorf("pattern %q does not select %q", p, control)
			}
		})
	}
	slices.Sort(patterns)
	for _, topic := range unparsable {
		t.Run(topic, func(t *testing.T) {
			th := subFor(th, t)
			status, body, _ := th.post(subPublishBody("probe", topic))
			if status != http.StatusOK {
				// MAT-8 is about topics the hub stores but cannot parse as
				// URLs: one it refuses would leave the rule untested.
				t.Fatalf("the hub refused topic %q (status %d: %s)", topic, status, body)
			}
			if !subReceives(t, th, "match="+subEnc(topic), topic) {
				t.Errorf("exact match=%q does not receive it", topic)
			}
			if !subReceives(t, th, "match=*", topic) {
				t.Errorf("match=* does not receive %q", topic)
			}
			for _, p := range patterns {
				if subReceives(t, th, "match_urlpattern="+subEnc(p), topic) {
					t.Errorf("pattern %q selected the unparsable topic %q", p, topic)
				}
			}
		})
	}
}

// catastrophicPatterns are URL patterns whose regular expressions take
// exponential time on a long run of a's without the final b in a
// backtracking engine, and linear time in RE2's (MAT-9).
var catastrophicPatterns = []string{"https://example.com/:x((?:a+)+b)", "https://example.com/:x((?:a|a)*b)", "https://example.com/:x((?:a*)*b)"}

// catastrophicTopic is a topic that catastrophicPatterns do not select: n
// a's and a c.
func catastrophicTopic(n int) string {
	return "https://example.com/" + strings.Repeat("a", n) + "c"
}

// MAT-9: patterns the engine cannot evaluate in linear time are refused,
// and the others evaluate correctly. That the evaluation is linear is
// shown by BenchmarkMAT9_CatastrophicPatterns: a test cannot tell time.
func TestMAT9_PatternsEvaluateInLinearTime(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	for _, p := range []string{"https://example.com/(?=a)", "https://example.com/:x(?!b)"} {
		if got := subStatus(th, http.MethodGet, "match_urlpattern="+subEnc(p), ""); got != http.StatusBadRequest {
			t.Errorf("lookaround pattern %q: status %d, want 400", p, got)
		}
	}
	for _, p := range catastrophicPatterns {
		t.Run(p, func(t *testing.T) {
			if topic := catastrophicTopic(2000); subReceives(t, th, "match_urlpattern="+subEnc(p), topic) {
				t.Errorf("pattern %q selected %q", p, topic)
			}
			if !subReceives(t, th, "match_urlpattern="+subEnc(p), "https://example.com/aaab") {
				t.Errorf("pattern %q does not select .../aaab", p)
			}
		})
	}
}

// BenchmarkMAT9_CatastrophicPatterns evaluates catastrophicPatterns on
// URLs of 2 000 and 20 000 a's: in linear time (MAT-9), ns/op grows about
// tenfold from the one to the other (a backtracking engine would not
// finish even the first). It calls Pattern.Test, the evaluation itself:
// the hub does not evaluate topics longer than topicurl.MaxTopicLength.
func BenchmarkMAT9_CatastrophicPatterns(b *testing.B) {
	r, err := topicurl.New(testHubURL)
	if err != nil {
		b.Fatal(err)
	}
	for i, raw := range catastrophicPatterns {
		p, err := index.Compile(raw, testHubURL, r)
		if err != nil {
			b.Fatalf("%q: %v", raw, err)
		}
		for _, n := range []int{2_000, 20_000} {
			topic := catastrophicTopic(n)
			b.Run(fmt.Sprintf("pattern%d/len=%d", i+1, n), func(b *testing.B) {
				for b.Loop() {
					if p.Test(topic) {
						b.Fatalf("%q selected the topic", raw)
					}
				}
			})
		}
	}
}

func TestMAT_ManyStreamsShareOnePattern(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	const n = 50
	q := "match_urlpattern=" + subEnc("https://example.com/shared/:n") + "&match=" + subEnc(subMarker)
	streams := make([]*subscription, n)
	for i := range streams {
		streams[i] = th.subscribe(q)
	}
	id := th.mustPost(subPublishBody("shared", "/shared/1"))
	for i, s := range streams {
		if ev := s.next(t); ev.ID != id {
			t.Fatalf("stream %d: got %+v, want %s", i, ev, id)
		}
	}

	// Closing some of the streams leaves the others subscribed.
	for _, s := range streams[:n/2] {
		s.close()
	}
	id = th.mustPost(subPublishBody("shared", "https://example.com/shared/2"))
	for i, s := range streams[n/2:] {
		if ev := s.next(t); ev.ID != id {
			t.Fatalf("stream %d: got %+v, want %s", n/2+i, ev, id)
		}
	}

	// Once every stream using the pattern is gone, a new one still works.
	for _, s := range streams[n/2:] {
		s.close()
	}
	if !subReceives(t, th, "match_urlpattern="+subEnc("https://example.com/shared/:n"), "/shared/3") {
		t.Fatal("a new stream with the pattern does not receive its topic")
	}
}

func TestMAT_ManyStreamsDistinctPatterns(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	const n = 50
	streams := make([]*subscription, n)
	for i := range streams {
		p := fmt.Sprintf("https://example.com/sel/%d/:n", i)
		streams[i] = th.subscribe("match_urlpattern=" + subEnc(p) + "&match=" + subEnc(subMarker))
	}
	for i := range n {
		th.mustPost(subPublishBody(fmt.Sprint(i), fmt.Sprintf("https://example.com/sel/%d/x", i)))
	}
	th.mustPost(subPublishBody("marker", subMarker))
	for i, s := range streams {
		if ev := s.next(t); ev.Data != fmt.Sprint(i) {
			t.Errorf("stream %d: got %q, want only its own update %d", i, ev.Data, i)
			continue
		}
		if ev := s.next(t); ev.Data != "marker" {
			t.Errorf("stream %d: got %q after its own update, want the marker", i, ev.Data)
		}
	}

	// Every other stream leaves: the remaining patterns still select.
	for i := 0; i < n; i += 2 {
		streams[i].close()
	}
	for i := 1; i < n; i += 2 {
		th.mustPost(subPublishBody(fmt.Sprint(i), fmt.Sprintf("/sel/%d/y", i)))
	}
	for i := 1; i < n; i += 2 {
		if ev := streams[i].next(t); ev.Data != fmt.Sprint(i) {
			t.Errorf("stream %d: got %q, want %d", i, ev.Data, i)
		}
	}
}

func TestMAT_PatternsSharingATrieNode(t *testing.T) {
	t.Parallel()
	// These patterns share their literal prefix (scheme, host, "/node"),
	// so removing some of them reshuffles the others.
	th := newTestHub(t)
	const n = 30
	streams := make([]*subscription, n)
	for i := range streams {
		p := fmt.Sprintf("https://example.com/node/:n/%d", i)
		streams[i] = th.subscribe("match_urlpattern=" + subEnc(p) + "&match=" + subEnc(subMarker))
	}
	for i := 0; i < n; i += 3 {
		streams[i].close()
	}
	for i := range n {
		th.mustPost(subPublishBody(fmt.Sprint(i), fmt.Sprintf("/node/x/%d", i)))
	}
	th.mustPost(subPublishBody("marker", subMarker))
	for i, s := range streams {
		if i%3 == 0 {
			continue
		}
		if ev := s.next(t); ev.Data != fmt.Sprint(i) {
			t.Errorf("stream %d: got %q, want its own update %d", i, ev.Data, i)
			continue
		}
		if ev := s.next(t); ev.Data != "marker" {
			t.Errorf("stream %d: got %q after its own update, want the marker", i, ev.Data)
		}
	}
	// A removed pattern can be subscribed to again.
	if !subReceives(t, th, "match_urlpattern="+subEnc("https://example.com/node/:n/0"), "/node/y/0") {
		t.Error("a new stream on a removed pattern does not receive its topic")
	}
}

func TestMAT_ChurnKeepsIndexConsistent(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	const workers, rounds = 8, 10
	errs := make(chan error, workers)
	for g := range workers {
		go func() {
			errs <- subChurn(th, g, rounds)
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// subChurn opens and closes streams on shared and private patterns, and
// checks that each one receives the update it publishes.
func subChurn(th *testHub, g, rounds int) error {
	for i := range rounds {
		pattern := "/churn/:n"
		if i%2 == 1 {
			pattern = fmt.Sprintf("/churn/:n/%d", g)
		}
		s, res := th.trySubscribe(http.MethodGet, "match_urlpattern="+subEnc(pattern), "")
		if s == nil {
			return fmt.Errorf("worker %d round %d: status %d", g, i, res.StatusCode)
		}
		topic := fmt.Sprintf("/churn/%d-%d", g, i)
		if i%2 == 1 {
			topic += fmt.Sprintf("/%d", g)
		}
		want := fmt.Sprintf("%d-%d", g, i)
		if status, body, _ := th.post(subPublishBody(want, topic)); status != http.StatusOK {
			s.close()
			return fmt.Errorf("worker %d: publish: status %d: %s", g, status, body)
		}
		timeout := time.After(testwait.Deadline)
	wait:
		for {
			select {
			case ev := <-s.events:
				if ev.Data == want {
					break wait
				}
			case <-timeout:
				s.close()
				return fmt.Errorf("worker %d: update %s on %s never arrived (pattern %s)", g, want, topic, pattern)
			}
		}
		s.close()
	}
	return nil
}

// A match_urlpattern written as a URI template (/users/{name}) is a valid
// URL pattern that matches only the literal text: the hub serves it, and
// says so in the log, at Warn the first time (issue 41). A pattern's own
// groups ({/*}?) are not taken for templates.
func TestURLPatternLikeATemplateIsLogged(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	th := startHub(t, nil, mercure.WithAnonymousSubscribers(), mercure.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	for _, p := range []string{"https://example.com/books{/*}?", "https://example.com/users/:name", `https://example.com/a\{b\}`, "https://example.com/{a}?"} {
		s := th.subscribe("match_urlpattern=" + url.QueryEscape(p))
		s.close()
	}
	if strings.Contains(logs.String(), "looks like a URI template") {
		t.Fatalf("a URL pattern's own syntax taken for a template: %s", logs.String())
	}
	for _, p := range []string{"https://example.com/users/{name}", "https://example.com/books{/id}"} {
		s := th.subscribe("match_urlpattern=" + url.QueryEscape(p))
		s.close()
	}
	var levels []string
	for l := range strings.Lines(logs.String()) {
		var line struct{ Level, Msg, Pattern string }
		if json.Unmarshal([]byte(l), &line) == nil && strings.Contains(line.Msg, "looks like a URI template") {
			levels = append(levels, line.Level+" "+line.Pattern)
		}
	}
	want := []string{"WARN https://example.com/users/{name}", "DEBUG https://example.com/books{/id}"}
	if !slices.Equal(levels, want) {
		t.Fatalf("logged %q, want %q", levels, want)
	}
}
