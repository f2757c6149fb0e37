package index

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dunglas/go-urlpattern"

	"github.com/mercurekit/mercure/internal/topicurl"
)

// enginePattern compiles raw with the engine alone, the way compile
// does: absolute without a base, relative against the hub URL.
func enginePattern(raw string) (p *urlpattern.URLPattern, err error) {
	defer func() {
		if recover() != nil {
			p, err = nil, ErrPattern
		}
	}()
	p, err = urlpattern.New(raw, "", nil)
	if errors.Is(err, urlpattern.ErrNoBaseURL) {
		p, err = urlpattern.New(raw, hubURL, nil)
	}
	return p, err
}

func engineTest(p *urlpattern.URLPattern, href string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return p.Test(href, "")
}

// equivalencePatterns are patterns with every kind of part, in every
// component, modifiers, escapes, non-special schemes and relative ones.
var equivalencePatterns = []string{
	"https://example.com/users/42/{*}", "https://example.com/users/:id/books/42", "/chats/42/messages/:m",
	"https://example.com/users/42/*", "https://example.com/books/:id", "/books/:id", "books/:id",
	"https://example.com/books{/:id}?", "https://example.com/books{/:id}*", "https://example.com/books{/:id}+",
	"https://example.com/:id(\\d+)", "https://example.com/(books|authors)/:id", "https://example.com/:x(.*)",
	"https://example.com/([^\\/]+?)", "https://example.com/:a/:b?", "https://example.com/:a+", "https://example.com/:a*",
	"https://example.com/*.json", "https://example.com/:file.json", "https://example.com/:file{.json}?",
	"https://example.com/{a}?b", "https://example.com/a{b}?c", "https://example.com/{books}+", "https://example.com/{x/}*y",
	"https://*.example.com/:a", "https://:sub.example.com/*", "https://example.{com|org}/*", "https://{www.}?example.com/*",
	"http{s}?://example.com/*", "*://example.com/*", "*://*/*", "https://example.com:8443/*", "https://example.com:443/*",
	"https://example.com:*/*", "https://example.com:(80|443)/*", "https://user:pass@example.com/*", "https://:u@example.com/*",
	"https://example.com/*?q=:v", "https://example.com/*?*", "https://example.com/a?b", "https://example.com/a#frag",
	"https://example.com/a#*", "https://example.com/*#:h", "https://example.com/caf%C3%A9/:x", "https://example.com/café/:x",
	"https://EXAMPLE.com/Books/:id", "HTTPS://example.com/*", "https://example.com/a%2Fb/*", "https://example.com/a\\:b/*",
	"https://example.com/a\\*b", "https://example.com/\\(x\\)/*", "https://example.com/a b/*", "https://example.com/%41/*",
	"urn:*", "urn\\:isbn\\:*", "urn:isbn\\:(\\d+)", "urn\\:isbn\\::id", "mailto\\:*", "foo://bar/:x", "foo://bar/*", "foo\\:*",
	"data\\:text/plain,*", "https://[::1]/*", "https://[\\:\\:1]:8080/*", "https://127.0.0.1/*", "wss://example.com/:room",
	"ftp://example.com/*", "/.well-known/mercure/*", "/*", "*", "?q=1", "#x", "../up/*", "./here/:x",
	"https://example.com/:a/b/:c/d/*", "https://example.com/{:a}/x", "https://example.com/:a([a-z]{2,8})-:b(\\d{1,4})",
	"https://example.com/{(\\d+)}+", "https://example.com/(\\d+)+", "https://example.com/(a)?", "https://example.com//:x",
	// Groups that look at the text around them (fuzzed once): matched
	// apart from the fixed text beside them, they would match here.
	"https://example.com(\\A)+", "https://example.com/x(^a)", "https://example.com/a(b$)c", "https://example.com/a(\\Bb)",
}

var equivalenceTopics = []string{
	"https://example.com/users/42/x", "https://example.com/users/42", "https://example.com/users/42/", "https://example.com/users/43/a/b",
	"https://example.com/users/7/books/42", "https://example.com/users/7/books/420", "https://example.com/users//books/42",
	"https://example.com/chats/42/messages/1", "https://example.com/chats/42/messages/", "https://example.com/chats/42/messages/1/2",
	"/chats/42/messages/9", "/books/1", "/books", "/books/", "books/1", "https://example.com/books/1?x=1#y", "https://example.com/books",
	"https://example.com/books/1/2", "https://example.com/123", "https://example.com/abc", "https://example.com/a/b", "https://example.com/a/",
	"https://example.com/x.json", "https://example.com/x", "https://example.com/b", "https://example.com/ab", "https://example.com/abc",
	"https://example.com/booksbooks", "https://example.com/x/x/y", "https://example.com/y", "https://www.example.com/1",
	"https://a.b.example.com/1", "https://example.org/x", "http://example.com/x", "HTTPS://EXAMPLE.COM/x", "https://example.com:8443/x",
	"https://example.com:443/x", "https://example.com:80/x", "http://example.com:80/x", "https://user:pass@example.com/x",
	"https://user@example.com/x", "https://example.com/x?q=1", "https://example.com/x?q=", "https://example.com/a?b",
	"https://example.com/a#frag", "https://example.com/a#other", "https://example.com/x#h", "https://example.com/caf%C3%A9/1",
	"https://example.com/café/1", "https://example.com/Books/1", "https://example.com/a%2Fb/c", "https://example.com/a:b/c",
	"https://example.com/a*b", "https://example.com/(x)/y", "https://example.com/a%20b/c", "https://example.com/A/x",
	"https://example.com/%41/x", "urn:isbn:1", "urn:isbn:x", "URN:isbn:1", "urn:", "mailto:a@b", "foo://bar/1", "foo://bar/",
	"foo:x", "data:text/plain,hi", "https://[::1]/x", "https://[::1]:8080/x", "https://127.0.0.1/x", "https://0x7f.1/x",
	"wss://example.com/r", "ftp://example.com/f", "/.well-known/mercure/x", "/", "?q=1", "#x", "https://example.com/up/x",
	"https://example.com/.well-known/here/1", "https://example.com/1/b/2/d/3", "https://example.com/ab-12", "https://example.com/12",
	"https://example.com/1/2/3", "https://example.com/a", "https://example.com//1", "https://example.com/\\x", "https://example.com/a/../b",
	"https://example.com/%2e%2e/b", "https://ex%41mple.com/x", "https://example.com\t/x", "https://example.com/x\n", "not a url ::",
	"", "https://", "//example.com/x", "https://example.com/x?%zz", "https://xn--caf-dma.com/x", "https://café.com/x",
	"https://example.com/xa",
}

// TestMatcherEquivalence checks that Pattern.Test agrees with the
// engine's Test on every pattern and topic of the lists, topics resolved
// against the hub URL as the hub does and also taken as they are.
func TestMatcherEquivalence(t *testing.T) {
	_, r := newIndex(t)
	fallbacks := 0
	for _, raw := range equivalencePatterns {
		ep, eerr := enginePattern(raw)
		p, err := compile(raw, Cost{}, hubURL, r)
		if (eerr == nil) != (err == nil) {
			t.Errorf("%q: engine error %v, ours %v", raw, eerr, err)
			continue
		}
		if err != nil {
			continue
		}
		if p.m == nil {
			fallbacks++
			t.Logf("%q: evaluated by the engine", raw)
		}
		for _, topic := range equivalenceTopics {
			hrefs := []string{topic}
			if u, ok := r.Resolve(topic); ok {
				hrefs = append(hrefs, u.Href)
			}
			for _, href := range hrefs {
				if got, want := p.Test(href), engineTest(ep, href); got != want {
					t.Errorf("pattern %q, href %q: Test %v, engine %v", raw, href, got, want)
				}
			}
			if err := checkResolved(r, p, ep, topic); err != "" {
				t.Error(err)
			}
		}
	}
	if fallbacks > 0 {
		t.Errorf("%d patterns not evaluated by our matcher", fallbacks)
	}
}

// FuzzPatternEquivalence checks, on any pattern and topic, that a pattern
// compiles exactly when the engine compiles it and that Pattern.Test
// agrees with the engine's Test on the topic resolved against the hub URL
// and on the topic as it is.
func FuzzPatternEquivalence(f *testing.F) {
	for i, raw := range equivalencePatterns {
		f.Add(raw, equivalenceTopics[i%len(equivalenceTopics)])
	}
	_, r := newIndex(f)
	f.Fuzz(func(t *testing.T, raw, topic string) {
		if len(raw) > 128 || len(topic) > 256 {
			return
		}
		ep, eerr := enginePattern(raw)
		p, err := compile(raw, Cost{}, hubURL, r)
		if (eerr == nil) != (err == nil) {
			t.Fatalf("%q: engine error %v, ours %v", raw, eerr, err)
		}
		if err != nil {
			return
		}
		hrefs := []string{topic}
		if u, ok := r.Resolve(topic); ok {
			hrefs = append(hrefs, u.Href)
		}
		for _, href := range hrefs {
			if got, want := p.Test(href), engineTest(ep, href); got != want {
				t.Fatalf("pattern %q (matcher %v), href %q: Test %v, engine %v", raw, p.m != nil, href, got, want)
			}
		}
		if err := checkResolved(r, p, ep, topic); err != "" {
			t.Fatal(err)
		}
	})
}

// checkResolved checks the path the hub takes: topic resolved once,
// then looked up in an index and tested by its components. TestURL must
// agree with the engine's Test of the resolved URL, and the index must
// offer the pattern for every topic it matches (what it sets aside by
// literal prefix and tail, it sets aside soundly).
func checkResolved(r *topicurl.Resolver, p *Pattern, ep *urlpattern.URLPattern, topic string) string {
	u, ok := r.Resolve(topic)
	if !ok {
		return ""
	}
	want := engineTest(ep, u.Href)
	if got := p.TestURL(&u); got != want {
		return fmt.Sprintf("pattern %q (matcher %v), topic %q resolved to %+v: TestURL %v, engine %v", p.raw, p.m != nil, topic, u, got, want)
	}
	if !want {
		return ""
	}
	ix := New[int](r)
	ix.Add(URLPattern, p.raw, p, 1)
	if len(ix.Candidates(0, &u, nil)) != 1 {
		return fmt.Sprintf("pattern %q (keys %q, tail %+v %v) matches %q, but the index does not offer it", p.raw, p.keys, p.tail, p.hasTail, u.Href)
	}
	return ""
}

// TestRegexpsShared checks that distinct patterns of one shape share
// their compiled expressions: what differs between them is literal text.
func TestRegexpsShared(t *testing.T) {
	_, r := newIndex(t)
	before := internedRegexps()
	pats := make([]*Pattern, 0, 300)
	for _, raw := range distinctPatterns(300) {
		pats = append(pats, mustCompile(t, raw, r))
	}
	if n := internedRegexps() - before; n > 3 {
		t.Errorf("300 patterns of 3 shapes: %d new expressions, want at most 3", n)
	}
	for i, p := range pats {
		if p.m == nil {
			t.Fatalf("%q: evaluated by the engine", p.raw)
		}
		if want := fmt.Sprintf("https://example.com/users/%d/x", i); i%3 == 0 && !p.MatchTopic(want) {
			t.Errorf("%q does not match %q", p.raw, want)
		}
	}
}

// A pattern's literal path segments place it in the trie only where
// every topic it matches has them: "//" before a group with a modifier
// is that group's optional prefix, not an empty segment (found by
// FuzzPatternEquivalence).
func TestOptionalPrefixIsNoKey(t *testing.T) {
	_, r := newIndex(t)
	for _, c := range []struct{ pattern, topic string }{
		{"./***", "https://example.com/.well-known/x/y"},
		{"https://example.com/a//*?", "https://example.com/a/"},
		{"https://example.com/a//:id?", "https://example.com/a/"},
	} {
		p := mustCompile(t, c.pattern, r)
		u, ok := r.Resolve(c.topic)
		if !ok || !p.TestURL(&u) {
			t.Fatalf("%q does not match %q: the case tests nothing", c.pattern, c.topic)
		}
		ix := New[int](r)
		ix.Add(URLPattern, p.raw, p, 1)
		if len(ix.Candidates(0, &u, nil)) != 1 {
			t.Errorf("%q (keys %q) matches %q, but the index does not offer it", c.pattern, p.keys, c.topic)
		}
	}
}
