package index

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func mustTemplate(t testing.TB, raw string, ix *Index[int]) *Pattern {
	t.Helper()
	p, err := CompileTemplate(raw, ix.resolver)
	if err != nil {
		t.Fatalf("CompileTemplate(%q): %v", raw, err)
	}
	return p
}

func TestTemplateKeys(t *testing.T) {
	ix, _ := newIndex(t)
	for raw, want := range map[string][]string{
		"https://example.com/users/42/{id}":    {"https", "example.com", "", "users", "42"},
		"/books/{id}":                          {"https", "example.com", "", "books"},
		"https://example.com/books{/id}":       {"https", "example.com", ""},
		"https://example.com{/path}":           {"https"},
		"http://localhost:3000/books/{id}":     {"http", "localhost", "", "books"},
		"{scheme}://example.com/{id}":          nil,
		"urn:isbn:{id}":                        {"urn"},
		"https://{tenant}.example.com/a/{id}":  {"https"},
		"https://example.com/a%20b/{id}":       {"https", "example.com", "", "a%20b"},
		"https://example.com/a/../b/{id}":      {"https", "example.com", "", "b"}, // dot segments resolved first
		"https://user@example.com/books/{id}":  {"https"},
		"https://example.com:{port}/books/{x}": {"https"}, // does not resolve: kept as written
	} {
		if got := mustTemplate(t, raw, ix).keys; !slices.Equal(got, want) {
			t.Errorf("keys of %q = %q, want %q", raw, got, want)
		}
	}
}

// Templates are routed as URL patterns are: each distinct one evaluated
// once per topic, found through its literal prefix.
func TestIndexTemplates(t *testing.T) {
	ix, _ := newIndex(t)
	books := mustTemplate(t, "https://example.com/books/{id}", ix)
	user := mustTemplate(t, "https://example.com/users/42/{?topic}", ix)
	rel := mustTemplate(t, "/chat/{room}", ix)
	e1 := ix.Add(URITemplate, books.Raw(), books, 1)
	ix.Add(URITemplate, user.Raw(), user, 2)
	ix.Add(URITemplate, rel.Raw(), rel, 3)
	ix.Add(URITemplate, books.Raw(), ix.Shared(mustTemplate(t, books.Raw(), ix)), 4)
	for topic, want := range map[string][]int{
		"https://example.com/books/1":                 {1, 4},
		"https://example.com/books/1/2":               nil,
		"https://example.com/users/42/?topic=x":       {2},
		"https://example.com/users/43/?topic=x":       nil,
		"/chat/lobby":                                 {3},
		"https://example.com/chat/lobby":              {3},
		"https://other.example/chat/lobby":            nil,
		"https://example.com/books/%7Bid%7D":          {1, 4},
		"https://example.com/.well-known/mercure/abc": nil,
	} {
		if got := match(ix, topic); !slices.Equal(got, want) {
			t.Errorf("%q matched %v, want %v", topic, got, want)
		}
	}
	if _, pats, _ := ix.Len(); pats != 4 {
		t.Errorf("%d template subscriptions, want 4", pats)
	}
	if ix.MaxPerTopic() != 1 { // each on its own path of the trie
		t.Errorf("MaxPerTopic = %d, want 1", ix.MaxPerTopic())
	}
	ix.Remove(e1)
	if got := match(ix, "https://example.com/books/1"); !slices.Equal(got, []int{4}) {
		t.Errorf("after Remove: %v", got)
	}
}

// The same text read as a URL pattern and as a URI template gives two
// patterns: neither subscriber gets the other's topics.
func TestTemplateAndPatternDoNotShare(t *testing.T) {
	ix, r := newIndex(t)
	const raw = "https://example.com/books/{id}" // in URL Pattern syntax, {id} is the literal "id"
	tpl := mustTemplate(t, raw, ix)
	pat := mustCompile(t, raw, r)
	if tpl.Key() == pat.Key() {
		t.Fatal("same key")
	}
	ix.Add(URITemplate, raw, tpl, 1)
	ix.Add(URLPattern, raw, pat, 2)
	if ix.Shared(pat) != pat || ix.Shared(tpl) != tpl {
		t.Fatal("Shared mixed the kinds")
	}
	if got := match(ix, "https://example.com/books/7"); !slices.Equal(got, []int{1}) {
		t.Errorf("books/7 matched %v, want the template's", got)
	}
	if got := match(ix, "https://example.com/books/id"); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("books/id matched %v, want both", got)
	}
}

func TestCacheTemplates(t *testing.T) {
	_, r := newIndex(t)
	c := NewCache(hubURL, r, 1<<20)
	lim := Limit{Groups: 4, Size: 512}
	a, err := c.GetTemplate("https://example.com/books/{id}", lim)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.GetTemplate("https://example.com/books/{id}", lim)
	p, _ := c.Get("https://example.com/books/{id}", lim)
	if a != b || a == p || c.Compiles() != 2 {
		t.Fatalf("shared %v, template and pattern distinct %v, %d compiles", a == b, a != p, c.Compiles())
	}
	if _, err := c.GetTemplate("https://example.com/{a,b,c,d,e}", lim); !errors.Is(err, ErrCost) {
		t.Errorf("5 variables over a limit of 4 groups: %v", err)
	}
	if _, err := c.GetTemplate("https://example.com/"+string(make([]byte, 200))+"{a}", lim); !errors.Is(err, ErrCost) {
		t.Errorf("a long template over the size limit: %v", err)
	}
	if _, err := c.GetTemplate("https://example.com/{a", lim); err == nil || errors.Is(err, ErrCost) {
		t.Errorf("an invalid template: %v", err)
	}
	if c.Compiles() != 3 { // the invalid one was compiled, the costly ones never
		t.Errorf("%d compiles", c.Compiles())
	}
}

// TestTemplateCostBounds checks that EstimateTemplateCost bounds the heap
// a compiled URI template keeps at the rate Cost.Size documents for URL
// patterns, so that the same PatternLimits and MaxTotalPatternSize bound
// both. Templates keep a regular expression each.
func TestTemplateCostBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap of thousands of templates")
	}
	shapes := map[string]func(i int) string{
		"per-user":       func(i int) string { return fmt.Sprintf("https://example.com/users/%d/{id}", i) },
		"per-user query": func(i int) string { return fmt.Sprintf("https://example.com/users/%d/{?topic}", i) },
		"relative":       func(i int) string { return fmt.Sprintf("/chats/%d/messages/{m}", i) },
		"expressions":    func(i int) string { return fmt.Sprintf("{scheme}://{+host}/demo/%d/{id}.jsonld", i) },
		"many variables": func(i int) string { return fmt.Sprintf("https://example.com/%d{/a,b,c,d,e,f}", i) },
		"long literal":   func(i int) string { return fmt.Sprintf("https://example.com/%d%s/{x}", i, strings.Repeat("x", 200)) },
	}
	ix, _ := newIndex(t)
	checkCostBounds(t, shapes, func(raw string) int { return EstimateTemplateCost(raw).Size },
		func(raw string) *Pattern { return mustTemplate(t, raw, ix) })
}

// BenchmarkTemplateTest evaluates a template against a topic of the
// longest length the hub accepts, and a URL pattern of the same shape
// beside it: both engines are linear in the topic.
func BenchmarkTemplateTest(b *testing.B) {
	ix, r := newIndex(b)
	href := "https://example.com/books/" + strings.Repeat("a%2F", 500)
	for name, p := range map[string]*Pattern{
		"template":    mustTemplate(b, "https://example.com/books/{+id}", ix),
		"url pattern": mustCompile(b, "https://example.com/books/:id", r),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				p.Test(href)
			}
		})
	}
}
