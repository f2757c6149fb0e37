package uritemplate

import (
	"testing"

	"github.com/mercurekit/mercure/internal/topicurl"
)

const hubURL = "https://example.com/.well-known/mercure"

func resolver(t testing.TB) func(string) (string, bool) {
	t.Helper()
	r, err := topicurl.New(hubURL)
	if err != nil {
		t.Fatal(err)
	}
	return func(s string) (string, bool) {
		u, ok := r.Resolve(s)
		return u.Href, ok
	}
}

func TestIsTemplate(t *testing.T) {
	for s, want := range map[string]bool{
		"https://example.com/books/{id}":             true,
		"{scheme}://{+host}/demo/books/{id}.jsonld":  true,
		"/.well-known/mercure/subscriptions{/topic}": true,
		"https://example.com/users/foo/{?topic}":     true,
		"https://example.com/books/1":                false, // no expression: an exact topic
		"https://example.com/books/{id":              false, // unterminated
		"https://example.com/{}":                     false, // no variable
		"https://example.com/{a b}":                  false,
		"*":                                          false,
	} {
		if got := IsTemplate(s); got != want {
			t.Errorf("IsTemplate(%q) = %v, want %v", s, got, want)
		}
	}
}

// The drafts' examples, and what resolving literal text adds: topics and
// templates are compared as the hub resolves them.
func TestTemplateMatch(t *testing.T) {
	resolve := resolver(t)
	for _, c := range []struct {
		tpl, topic string
		want       bool
	}{
		{"https://example.com/books/{id}", "https://example.com/books/1", true},
		{"https://example.com/books/{id}", "https://example.com/books/", true}, // an undefined variable expands to nothing
		{"https://example.com/books/{id}", "https://example.com/books/1/chapters/2", false},
		{"https://example.com/books/{id}", "https://example.com/movies/1", false},
		{"https://example.com/books/{id}", "https://example.com/books/caf%C3%A9", true},
		{"https://example.com/books/{id}", "https://example.com/books/café", true}, // resolved to caf%C3%A9
		{"https://example.com/{+path}", "https://example.com/a/b/c", true},
		{"https://example.com/users/foo/{?topic}", "https://example.com/users/foo/?topic=https%3A%2F%2Fexample.com%2Fbooks%2F1", true},
		{"https://example.com/users/foo/{?topic}", "https://example.com/users/bar/?topic=x", false},
		{"{scheme}://{+host}/demo/books/{id}.jsonld", "https://localhost/demo/books/1.jsonld", true},
		{"{scheme}://{+host}/demo/books/{id}.jsonld", "https://localhost/demo/books/1.json", false},
		{"https://Example.com/books/{id}", "https://example.com/books/1", true}, // hosts are case-insensitive
		{"/books/{id}", "/books/1", true},                                       // relative: resolved against the hub URL
		{"/books/{id}", "https://example.com/books/1", true},
		{"/books/{id}", "https://other.example/books/1", false},
		{"urn:isbn:{id}", "urn:isbn:123", true},
		{"/.well-known/mercure/subscriptions{/type,match,subscriber}", "/.well-known/mercure/subscriptions/exact/https%3A%2F%2Fexample.com%2Fa/urn%3Auuid%3A1", true},
	} {
		tpl, err := Compile(c.tpl, resolve)
		if err != nil {
			t.Fatalf("Compile(%q): %v", c.tpl, err)
		}
		href, ok := resolve(c.topic)
		if !ok {
			t.Fatalf("topic %q does not resolve", c.topic)
		}
		if got := tpl.Match(href); got != c.want {
			t.Errorf("%q (resolved %q) matches %q (%q): %v, want %v", c.tpl, tpl.Resolved(), c.topic, href, got, c.want)
		}
	}
}

func TestTemplatePrefix(t *testing.T) {
	resolve := resolver(t)
	for tpl, want := range map[string]string{
		"https://example.com/users/42/{id}": "https://example.com/users/42/",
		"/books/{id}":                       "https://example.com/books/",
		"{scheme}://example.com/{id}":       "",
		"https://example.com:{port}/{id}":   "https://example.com:", // does not resolve: kept as written
	} {
		c, err := Compile(tpl, resolve)
		if err != nil {
			t.Fatal(err)
		}
		if c.Prefix() != want {
			t.Errorf("Prefix(%q) = %q, want %q", tpl, c.Prefix(), want)
		}
	}
}

// A literal that holds the placeholder text does not confuse resolution.
func TestTemplatePlaceholderCollision(t *testing.T) {
	resolve := resolver(t)
	tpl, err := Compile("https://example.com/MercureTpl0q/{id}", resolve)
	if err != nil {
		t.Fatal(err)
	}
	if !tpl.Match("https://example.com/MercureTpl0q/7") || tpl.Match("https://example.com/x/7") {
		t.Errorf("resolved %q", tpl.Resolved())
	}
}

func TestCompileRefuses(t *testing.T) {
	resolve := resolver(t)
	for _, s := range []string{"https://example.com/", "{", "https://example.com/{a b}", "{}"} {
		if _, err := Compile(s, resolve); err == nil {
			t.Errorf("Compile(%q) succeeded", s)
		}
	}
}

func TestVars(t *testing.T) {
	for s, want := range map[string]int{"/a": 0, "/{a}": 1, "/{a,b}{/c}": 3, "{?x,y,z}": 3, "a,b": 0} {
		if got := Vars(s); got != want {
			t.Errorf("Vars(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestTemplateSuffix(t *testing.T) {
	resolve := resolver(t)
	for tpl, want := range map[string]string{
		"https://{h}/{a}/x5":                   "/x5",
		"https://example.com/{id}.json":        ".json",
		"https://example.com/books/{id}":       "",
		"https://example.com/books/{id}{?x}":   "",
		"/a/{b}/c%20d":                         "/c%20d",
		"https://example.com/{a}/x{#f}":        "",
		"https://example.com/{+path}/comments": "/comments",
	} {
		c, err := Compile(tpl, resolve)
		if err != nil {
			t.Fatal(err)
		}
		if c.Suffix() != want {
			t.Errorf("Suffix(%q) = %q, want %q", tpl, c.Suffix(), want)
		}
	}
}

// FuzzTemplateSuffix checks that the literal suffix that Match compares
// first never turns a match away: every string the template's regular
// expression matches ends with it.
func FuzzTemplateSuffix(f *testing.F) {
	for _, s := range [][2]string{
		{"https://{h}/{a}/x5", "https://a/b/x5"}, {"/books/{id}.json", "/books/1.json"},
		{"https://example.com/{+path}/c", "https://example.com/a/b/c"}, {"{scheme}://{+host}/x", "https://h/x"},
		{"/a{/b*}/c", "/a/1/2/c"}, {"/a/{b}X", "/a/bX"}, {"/a/{b}%41", "/a/bA"},
	} {
		f.Add(s[0], s[1])
	}
	resolve := resolver(f)
	f.Fuzz(func(t *testing.T, raw, topic string) {
		if len(raw) > 128 || len(topic) > 256 {
			return
		}
		tpl, err := Compile(raw, resolve)
		if err != nil {
			return
		}
		for _, href := range []string{topic, func() string { h, _ := resolve(topic); return h }()} {
			if got, want := tpl.Match(href), tpl.re.MatchString(href); got != want {
				t.Fatalf("%q (suffix %q), %q: Match %v, expression %v", raw, tpl.Suffix(), href, got, want)
			}
		}
	})
}
