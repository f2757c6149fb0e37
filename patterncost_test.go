package mercure_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// patternQuery is a subscribe query with one match_urlpattern per pattern.
func patternQuery(patterns ...string) string {
	v := url.Values{}
	for _, p := range patterns {
		v.Add("match_urlpattern", p)
	}
	return v.Encode()
}

// trySubscribeStatus opens a stream and returns its status and, when it is
// not 200, the problem detail.
func (th *testHub) trySubscribeStatus(q string, header ...string) (int, string) {
	th.t.Helper()
	s, res := th.trySubscribe(http.MethodGet, q, "", header...)
	if s != nil {
		return http.StatusOK, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// MAT-9, SEC-7: a pattern whose groups or compiled size exceed the limits
// is refused with 400 before it is compiled; anonymous streams get
// tighter limits than streams with a token.
func TestMAT9_PatternOverLimitsRefusedBeforeCompiling(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithAnonymousSubscribers())
	tok := subToken(t, detail("subscribe", exactTopic("https://example.com/private")))
	cases := []struct {
		name, pattern  string
		anonymous, tok int // statuses
	}{
		// The shape: many wildcards make each evaluation cost
		// milliseconds and the compiled pattern hundreds of kilobytes.
		{"2000 wildcards", "*://*/" + strings.Repeat("*", 2000) + "%23i", 400, 400},
		{"20 wildcards", "*://*/" + strings.Repeat("*", 18), 400, 200},
		{"6 wildcards", "*://*/" + strings.Repeat("*", 4), 200, 200},
		// A short pattern that expands to thousands of instructions.
		{"expanding regexp", "https://example.com/:x(.{1,1000})+", 400, 400},
		{"mid-sized regexp", "https://example.com/:x(a{600})", 400, 200},
		{"small regexp", "https://example.com/:x(\\d{1,8})", 200, 200},
	}
	for _, c := range cases {
		before := th.PatternCompiles()
		status, detail := th.trySubscribeStatus(patternQuery(c.pattern))
		if status != c.anonymous {
			t.Errorf("%s, anonymous: %d %s, want %d", c.name, status, detail, c.anonymous)
		}
		if status == http.StatusBadRequest && th.PatternCompiles() != before {
			t.Errorf("%s, anonymous: refused after compiling it", c.name)
		}
		if status, detail := th.trySubscribeStatus(patternQuery(c.pattern+"#t"), "Authorization", "Bearer "+tok); status != c.tok {
			t.Errorf("%s, with a token: %d %s, want %d", c.name, status, detail, c.tok)
		}
	}
}

// MAT-9: the patterns of one request share a budget, so that the heap a
// request makes the hub keep is bounded whatever it spreads it over.
func TestMAT9_RequestPatternBudget(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{AnonymousPatterns: mercure.PatternLimits{MaxStreamSize: 1000}}))
	var patterns []string
	for i := range 10 {
		patterns = append(patterns, fmt.Sprintf("https://example.com/%d/%s/:id", i, strings.Repeat("x", 20)))
	}
	if status, detail := th.trySubscribeStatus(patternQuery(patterns...)); status != http.StatusBadRequest || !strings.Contains(detail, "more than 1000") {
		t.Fatalf("10 patterns over the request budget: %d %s", status, detail)
	}
	// The same pattern repeated costs its memory once.
	same := make([]string, 10)
	for i := range same {
		same[i] = patterns[0]
	}
	if status, detail := th.trySubscribeStatus(patternQuery(same...)); status != http.StatusOK {
		t.Fatalf("one pattern ten times: %d %s", status, detail)
	}
}

// MAT-9: the patterns that one topic is evaluated against are capped,
// however they are spread over the literal prefixes the topic has; the
// cap counts each path of the index, not the whole index, and a pattern
// already registered is always accepted.
func TestMAT9_PatternsPerTopic(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxPatternsPerTopic: 8}))
	levels := []string{"*://*/", "https://*/", "https://example.com/", "https://example.com/books/"}
	n := 0
	for _, prefix := range levels {
		for j := range 2 {
			if status, detail := th.trySubscribeStatus(patternQuery(fmt.Sprintf("%s:a/%d", prefix, j))); status != http.StatusOK {
				t.Fatalf("pattern %d: %d %s", n, status, detail)
			}
			n++
		}
	}
	for _, p := range []string{"*://*/:a/x", "https://example.com/books/:a/x"} {
		if status, detail := th.trySubscribeStatus(patternQuery(p)); status != http.StatusTooManyRequests {
			t.Errorf("a 9th pattern on the path of https://example.com/books/1 (%s): %d %s", p, status, detail)
		}
	}
	// Another host's path holds only the two root patterns.
	if status, detail := th.trySubscribeStatus(patternQuery("https://other.example/:a/x")); status != http.StatusOK {
		t.Errorf("a pattern on another path: %d %s", status, detail)
	}
	if status, detail := th.trySubscribeStatus(patternQuery("https://example.com/books/:a/1")); status != http.StatusOK {
		t.Errorf("a pattern already registered: %d %s", status, detail)
	}
	// Refused streams left nothing behind: they still deliver.
	s := th.subscribe(patternQuery("https://example.com/books/:a/1"))
	th.mustPost("topic=" + url.QueryEscape("https://example.com/books/x/1") + "&data=ok")
	if ev := s.next(t); ev.Data != "ok" {
		t.Fatalf("got %+v", ev)
	}
}

// AUTH-2, MAT-9: a hub authenticates a subscriber before it reads its
// matchers: a client it refuses makes it compile nothing.
func TestAUTH2_AuthenticateBeforeCompiling(t *testing.T) {
	t.Parallel()
	for _, anonymous := range []bool{false, true} {
		var opts []mercure.Option
		if anonymous {
			opts = append(opts, mercure.WithAnonymousSubscribers())
		}
		th := startAuthHub(t, opts...)
		var patterns []string
		for i := range 64 {
			patterns = append(patterns, fmt.Sprintf("https://example.com/%d/:id", i))
		}
		q := patternQuery(patterns...)
		status, _ := th.trySubscribeStatus(q, "Authorization", "Bearer not-a-token")
		if status != http.StatusUnauthorized {
			t.Errorf("anonymous=%v, invalid token: %d, want 401", anonymous, status)
		}
		if !anonymous {
			if status, _ := th.trySubscribeStatus(q); status != http.StatusUnauthorized {
				t.Errorf("no token on a hub that needs one: %d, want 401", status)
			}
		}
		if n := th.PatternCompiles(); n != 0 {
			t.Errorf("anonymous=%v: %d patterns compiled for refused requests", anonymous, n)
		}
	}
}

// AUTH-30, MAT-9: a token's URL pattern grants are compiled once, shared
// by its verification, its streams and the hub's subscriptions, not once
// per request; and a grant over the pattern limits makes the token
// invalid.
func TestAUTH30_GrantPatternsCompiledOnce(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t)
	tok := subToken(t, detail("subscribe", patternTopic("https://example.com/books/:id"), patternTopic("https://example.com/users/:u/{*}?")))
	for range 3 {
		s := th.subscribe(patternQuery("https://example.com/books/:id"), "Authorization", "Bearer "+tok)
		s.close()
	}
	if n := th.PatternCompiles(); n != 2 {
		t.Errorf("two distinct patterns compiled %d times over three streams", n)
	}
	wide := subToken(t, detail("subscribe", patternTopic("*://*/"+strings.Repeat("*", 40))))
	if status, _ := th.trySubscribeStatus("match=x", "Authorization", "Bearer "+wide); status != http.StatusUnauthorized {
		t.Errorf("a grant with 42 groups: %d, want 401", status)
	}
}

// Limits.MaxTotalPatternSize bounds the compiled patterns of all streams
// together: past it a stream with a new pattern gets 429, and one that
// shares a registered pattern is still accepted.
func TestMAT9_TotalPatternSize(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxTotalPatternSize: 600}))
	accepted := 0
	for i := range 10 {
		status, detail := th.trySubscribeStatus(patternQuery(fmt.Sprintf("https://example.com/%d/:id", i)))
		switch status {
		case http.StatusOK:
			accepted++
		case http.StatusTooManyRequests:
			if !strings.Contains(detail, "too many URL patterns") {
				t.Fatalf("429 for another reason: %s", detail)
			}
		default:
			t.Fatalf("pattern %d: %d %s", i, status, detail)
		}
	}
	if accepted == 0 || accepted == 10 {
		t.Fatalf("%d of 10 distinct patterns accepted under a total of 600 instructions", accepted)
	}
	if status, detail := th.trySubscribeStatus(patternQuery("https://example.com/0/:id")); status != http.StatusOK {
		t.Fatalf("a registered pattern, shared: %d %s", status, detail)
	}
}

// MAT-9 (issue 41): a topic is parsed as a URL once per update, however
// many URL patterns test it: they test the components of the topic as
// resolved once. Not parallel: it counts the parser's runs in the whole
// process.
func TestMAT9_TopicsParsedOncePerUpdate(t *testing.T) {
	th := newTestHub(t)
	const patterns, topics = 64, 16
	for i := range patterns {
		th.subscribe(patternQuery(fmt.Sprintf("https://:h/:a/:b/:c/:d/:e/:f/x%d", i)))
	}
	marker := th.subscribe("match=urn%3Amarker")
	// Topics that only the parser reads, resolved or not: with a user
	// name.
	body := "data=x&topic=urn%3Amarker"
	for i := range topics {
		body += "&topic=" + url.QueryEscape(fmt.Sprintf("https://user@example.com/a/b/c/d/e/f/g/t%d", i))
	}
	before := topicurl.Parses()
	th.mustPost(body)
	// Exact subscribers get an update before patterns are evaluated: the
	// next update's marker tells that the first one's dispatch is over.
	th.mustPost("data=y&topic=urn%3Amarker")
	marker.next(t)
	marker.next(t)
	if n := topicurl.Parses() - before; n > topics+2 {
		t.Errorf("%d topics in two updates, tested against %d patterns: %d parses, want at most one per topic", topics+2, patterns, n)
	}
}

// MAT-9 (issue 41): the new URL patterns of a class of streams must keep
// what one topic can be evaluated against within the class's
// MaxSizePerTopic, counted along each chain of literal prefixes; the
// patterns whose literal text fixes the topic's last segment count once
// per segment. Past it, a stream gets 429 and says why; a registered
// pattern is shared at no cost, and other prefixes are not affected.
func TestMAT9_SizePerTopic(t *testing.T) {
	t.Parallel()
	const budget = 1000
	th := startAuthHub(t, mercure.WithAnonymousSubscribers(), mercure.WithLimits(mercure.Limits{
		AnonymousPatterns: mercure.PatternLimits{MaxSizePerTopic: budget},
	}))
	// Patterns evaluated for every https topic, nothing literal after
	// the scheme to set them aside.
	pattern := func(i int) string { return fmt.Sprintf("https://*/:a(\\d+)-%d", i) }
	size, n := 0, 0
	for ; ; n++ {
		status, detail := th.trySubscribeStatus(patternQuery(pattern(n)))
		if status == http.StatusOK {
			c, err := index.EstimateCost(pattern(n))
			if err != nil {
				t.Fatal(err)
			}
			size += c.Size
			continue
		}
		if status != http.StatusTooManyRequests || !strings.Contains(detail, fmt.Sprintf("more than %d for anonymous subscribers", budget)) {
			t.Fatalf("pattern %d: %d %s", n, status, detail)
		}
		break
	}
	if n == 0 || size > budget {
		t.Fatalf("%d patterns of %d instructions in all accepted under a budget of %d", n, size, budget)
	}
	// Shared, or for topics of other prefixes: accepted. Anonymous
	// patterns for https topics are not: the anonymous clients together
	// have spent what they may add to them.
	for p, want := range map[string]int{
		pattern(0):                      http.StatusOK,
		"wss://example.com/:a(\\d+)":    http.StatusOK,
		"https://example.com/books/:id": http.StatusTooManyRequests,
	} {
		if status, detail := th.trySubscribeStatus(patternQuery(p)); status != want {
			t.Errorf("%s: %d %s, want %d", p, status, detail, want)
		}
	}
	// Patterns that each fix their own last segment cost a topic one
	// evaluation: as many as the anonymous share of MaxPatternsPerPrefix
	// (32, over 3 000 instructions in all) are accepted under one prefix.
	for i := range 32 {
		if status, detail := th.trySubscribeStatus(patternQuery(fmt.Sprintf("ftp://*/:a(\\d+)/x%d", i))); status != http.StatusOK {
			t.Fatalf("tail pattern %d: %d %s", i, status, detail)
		}
	}
	// A token holder's class has its own budget: the default.
	tok := subToken(t, detail("subscribe", exactTopic("https://example.com/private")))
	for _, p := range []string{pattern(n), "https://example.com/books/:id"} {
		if status, detail := th.trySubscribeStatus(patternQuery(p), "Authorization", "Bearer "+tok); status != http.StatusOK {
			t.Errorf("%s, with a token: %d %s", p, status, detail)
		}
	}
}
