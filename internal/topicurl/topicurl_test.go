package topicurl

import (
	"strings"
	"sync"
	"testing"
)

const defaultHub = "https://example.com/.well-known/mercure"

func mustNew(tb testing.TB, hubURL string) *Resolver {
	tb.Helper()
	r, err := New(hubURL)
	if err != nil {
		tb.Fatalf("New(%q): %v", hubURL, err)
	}
	return r
}

// reservedCases are the PUB-6 table cases, shared with the fuzz seed corpus.
var reservedCases = []struct {
	hub      string // "" means defaultHub
	topic    string
	reserved bool
}{
	// Reserved, default hub.
	{"", "/.well-known/mercure", true},
	{"", "https://any.example/.well-known/mercure/subscriptions/x", true},
	{"", "/.well-known/%6Dercure/x", true},
	{"", "/.well-known/%6dercure/x", true},
	{"", "/.well-known/mercure/../mercure/x", true},
	{"", "/a/%2E%2E/.well-known/mercure", true},
	{"", "/a/%2e%2E/.well-known/mercure/", true},
	{"", "mercure/x", true}, // resolves to /.well-known/mercure/x
	{"", `\.well-known\mercure`, true},
	{"", " /.well-known/mercure ", true},   // leading/trailing spaces trimmed
	{"", "/.well-known/mer\tcure", true},   // tab removed
	{"", "/.well-known/mer\ncure/x", true}, // newline removed
	{"", "HTTPS://EXAMPLE.COM/.well-known/mercure/x", true},
	{"", "//other.host/.well-known/mercure", true},
	{"", "/.well-known/mercure?x=1", true},
	{"", "/.well-known/mercure#frag", true},
	{"", "/.well-known/./mercure/x", true},
	{"", "/.well-known/mercure//x", true},
	{"", "/%2E%77ell-known/%6D%65%72%63%75%72%65", true},
	{"", "/.well-known/mercure/%2E%2E%2E", true},
	{"", "", true},   // the empty reference resolves to the hub URL itself
	{"", "?q", true}, // same
	{"", "#", true},  // same
	{"", "foo:/.well-known/mercure", true},
	{"", "foo://h/a/%2e%2E/.well-known/mercure/x", true},
	{"", "file:///.well-known/mercure", true},
	// Opaque paths: decoding + RFC 3986 dot removal turn "..//" and ".//"
	// prefixes into a leading "/".
	{"", "foo:.//.well-known/mercure", true},
	{"", "foo:%2E%2E//.well-known/mercure/x", true},

	// Not reserved, default hub.
	{"", "/.well-known/mercure-x", false},
	{"", "/.well-known/mercure%2Fx", false},
	{"", "/.well-known/mercure%2fx", false},
	{"", "/.well-known/Mercure", false},
	{"", "/.well-known/%4Dercure", false},
	{"", "urn:uuid:0b5b6f9e-3c51-4f4a-9d3e-5a1d2c7e8f90", false},
	{"", "https://example.com/books/1", false},
	{"", "mercurex", false},
	{"", "/.well-known/mercur", false},
	{"", "/.well-known/mercure%252Fx", false},
	{"", "/.well-known/%256Dercure", false}, // no double decoding
	// Single pass: decoding "%65" creates "%2e" / "%6D", which stay encoded.
	{"", "/a/%2%65%2%65/.well-known/mercure", false},
	{"", "/.well-known/%%36Dercure", false},
	{"", "//example.com//.well-known/mercure", false},
	{"", "foo:/.//.well-known/mercure", false}, // path is "//.well-known/mercure"
	{"", "foo:.well-known/mercure", false},     // opaque path without leading "/"
	{"", "http://[::1", false},                 // does not parse
	{"", "https://exa mple.com/", false},       // does not parse
	{"", "https://example.com:99999/.well-known/mercure", false},
	{"", "https://\xff/.well-known/mercure", false},

	// Hub below /app.
	{"https://example.com/app/hub", "/app/hub/x", true},
	{"https://example.com/app/hub", "/app/hub", true},
	{"https://example.com/app/hub", "hub/x", true}, // relative to /app/
	{"https://example.com/app/hub", "hub", true},
	{"https://example.com/app/hub", "/.well-known/mercure/x", false},
	{"https://example.com/app/hub", "/app/hubx", false},
	{"https://example.com/app/hub", "/app/", false},

	// Hub URL needing normalization itself.
	{"https://example.com/app/hub/", "/app/hub/x", true},
	{"https://example.com/app/hub/", "/app/hub", true},
	{"https://example.com/app/hub/", "/app/hubx", false},
	{"https://example.com/%61pp/./h%75b", "/app/hub/x", true},
	{"http://localhost:3000/.well-known/mercure", "https://example.com/.well-known/mercure", true},
}

func TestReservedPUB6(t *testing.T) {
	for _, tc := range reservedCases {
		hub := tc.hub
		if hub == "" {
			hub = defaultHub
		}
		r := mustNew(t, hub)
		if got := r.Reserved(tc.topic); got != tc.reserved {
			t.Errorf("hub %q: Reserved(%q) = %v, want %v", hub, tc.topic, got, tc.reserved)
		}
	}
}

func TestResolve(t *testing.T) {
	r := mustNew(t, defaultHub)
	tests := []struct {
		topic string
		want  URL
	}{
		{"/books/7", URL{Href: "https://example.com/books/7", Scheme: "https", Hostname: "example.com", Pathname: "/books/7"}},
		{"https://Example.COM:443/a/../b", URL{Href: "https://example.com/b", Scheme: "https", Hostname: "example.com", Pathname: "/b"}},
		{"books/1", URL{Href: "https://example.com/.well-known/books/1", Scheme: "https", Hostname: "example.com", Pathname: "/.well-known/books/1"}},
		{"urn:isbn:123", URL{Href: "urn:isbn:123", Scheme: "urn", Pathname: "isbn:123"}},
		{"HTTP://B\u00dcCHER.example:8080/x?q#f", URL{Href: "http://xn--bcher-kva.example:8080/x?q#f", Scheme: "http", Hostname: "xn--bcher-kva.example", Port: "8080", Pathname: "/x", Query: "q", Fragment: "f"}},
		{"http://0x7f.1/x", URL{Href: "http://127.0.0.1/x", Scheme: "http", Hostname: "127.0.0.1", Pathname: "/x"}},
		{"http://[0:0::1]/x", URL{Href: "http://[::1]/x", Scheme: "http", Hostname: "[::1]", Pathname: "/x"}},
		{"/a b/%6D", URL{Href: "https://example.com/a%20b/%6D", Scheme: "https", Hostname: "example.com", Pathname: "/a%20b/%6D"}},
		{"foo:/x/../y", URL{Href: "foo:/y", Scheme: "foo", Pathname: "/y"}},
		{"https://u:p@example.com/x?a#b", URL{Href: "https://u:p@example.com/x?a#b", Scheme: "https", Username: "u", Password: "p", Hostname: "example.com", Pathname: "/x", Query: "a", Fragment: "b"}},
		// Canonical already: the fast path.
		{"http://localhost:3000/x?a=1#b", URL{Href: "http://localhost:3000/x?a=1#b", Scheme: "http", Hostname: "localhost", Port: "3000", Pathname: "/x", Query: "a=1", Fragment: "b"}},
	}
	for _, tc := range tests {
		got, ok := r.Resolve(tc.topic)
		if !ok {
			t.Errorf("Resolve(%q): ok = false", tc.topic)
			continue
		}
		if got != tc.want {
			t.Errorf("Resolve(%q) = %+v, want %+v", tc.topic, got, tc.want)
		}
	}

	for _, topic := range []string{"http://[::1", "https://exa mple.com/", "http://a:b:c/", "https:///"} {
		if got, ok := r.Resolve(topic); ok || got != (URL{}) {
			t.Errorf("Resolve(%q) = %+v, %v; want zero URL, false", topic, got, ok)
		}
	}
}

func TestMaxTopicLength(t *testing.T) {
	r := mustNew(t, defaultHub)
	pad := func(prefix string, n int) string { return prefix + strings.Repeat("a", n-len(prefix)) }

	// At the limit, topics are parsed as usual.
	for _, tc := range []struct {
		topic    string
		reserved bool
	}{
		{pad("/.well-known/mercure/", MaxTopicLength), true},
		{pad("urn:x:", MaxTopicLength), false},
		{pad("https://example.com/books/", MaxTopicLength), false},
	} {
		if got := r.Reserved(tc.topic); got != tc.reserved {
			t.Errorf("Reserved(%.30q…) = %v, want %v", tc.topic, got, tc.reserved)
		}
		if _, ok := r.Resolve(tc.topic); !ok {
			t.Errorf("Resolve(%.30q…): ok = false", tc.topic)
		}
	}

	// Above it, Reserved fails closed and Resolve fails.
	for _, topic := range []string{
		pad("/.well-known/mercure/", MaxTopicLength+1),
		pad("urn:x:", MaxTopicLength+1),
		"http://" + strings.Repeat("a@", 32<<10), // quadratic in the parser
	} {
		if !r.Reserved(topic) {
			t.Errorf("Reserved(%.30q…) = false for an over-long topic", topic)
		}
		if u, ok := r.Resolve(topic); ok {
			t.Errorf("Resolve(%.30q…) = %+v, true for an over-long topic", topic, u)
		}
	}
}

func TestNew(t *testing.T) {
	for _, hub := range []string{
		"",
		"/.well-known/mercure", // relative
		"https://exa mple.com/.well-known/mercure",
		"urn:example:hub",
		"ftp://example.com/hub",
		"https://example.com",
		"https://example.com/",
		"https://example.com/a/..",
	} {
		if r, err := New(hub); err == nil {
			t.Errorf("New(%q) = %+v, nil; want an error", hub, r)
		}
	}
	r := mustNew(t, "HTTPS://example.com/.well-known/mercure/")
	if r.hubPath != "/.well-known/mercure" {
		t.Errorf("hubPath = %q", r.hubPath)
	}
}

func TestNormalizePath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"%", "%"},
		{"%4", "%4"},
		{"%4G", "%4G"},
		{"%41", "A"},
		{"/%7e%7E%2d%2D%5f%5F%2e", "/~~--__."},
		{"/%2F%2f%20%25%00%C3%A9", "/%2F%2f%20%25%00%C3%A9"},
		{"/%25%34%31", "/%2541"}, // single pass
		{"/a/%2%65", "/a/%2e"},   // single pass: the new escape is not decoded
		{"/%%36D", "/%6D"},
		{"/a/%2E%2E/b", "/b"},
		{"/a/.%2e/b", "/b"},
		{"/a/b/%2E", "/a/b/"},
		{"/a/b/..", "/a/"},
		{"/..", "/"},
		{"/../../a", "/a"},
		{"../a", "a"},
		{"./a", "a"},
		{"..//a", "/a"},
		{".", ""},
		{"..", ""},
		{"a/..", "/"}, // RFC 3986 5.2.4 as written
		{"/a/b/c/./../../g", "/a/g"},
		{"mid/content=5/../6", "mid/6"},
		{"/a/.../b", "/a/.../b"},
		{"/a/..b/.c", "/a/..b/.c"},
	}
	for _, tc := range tests {
		if got := normalizePath(tc.in); got != tc.want {
			t.Errorf("normalizePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := refNormalize(tc.in); got != tc.want {
			t.Errorf("refNormalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNormalizePathNoAlloc(t *testing.T) {
	p := "/.well-known/mercure/subscriptions/x"
	if n := testing.AllocsPerRun(100, func() { _ = normalizePath(p) }); n != 0 {
		t.Errorf("normalizePath allocates %v times for a clean path", n)
	}
}

// TestConcurrent checks, under -race, that a Resolver can be shared. The
// goroutines are released together so that their first parses overlap: the
// parser clones the hub URL on every call, and Url.Clone would lazily write
// to the hub URL on first use if New did not prevent it.
func TestConcurrent(t *testing.T) {
	r := mustNew(t, defaultHub)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			<-start
			for j := range 50 {
				for _, tc := range reservedCases[:20] {
					if tc.hub == "" && r.Reserved(tc.topic) != tc.reserved {
						t.Errorf("goroutine %d: Reserved(%q) mismatch", i, tc.topic)
					}
				}
				if u, ok := r.Resolve("books/1?x#y"); !ok || u.Pathname != "/.well-known/books/1" {
					t.Errorf("goroutine %d/%d: Resolve = %+v, %v", i, j, u, ok)
				}
			}
		})
	}
	close(start)
	wg.Wait()
}

func TestReservedFilter(t *testing.T) {
	for _, hub := range filterHubs {
		r := mustNew(t, hub)
		for _, topic := range filterSeeds {
			if got, want := r.Reserved(topic), r.reservedSlow(topic); got != want {
				t.Errorf("hub %q: Reserved(%q) = %v, reservedSlow = %v", hub, topic, got, want)
			}
		}
		for _, tc := range reservedCases {
			if got, want := r.Reserved(tc.topic), r.reservedSlow(tc.topic); got != want {
				t.Errorf("hub %q: Reserved(%q) = %v, reservedSlow = %v", hub, tc.topic, got, want)
			}
		}
	}

	for _, tc := range []struct {
		hub, token  string
		dirHasToken bool
	}{
		{defaultHub, "mercure", false},
		{"https://example.com/app/hub", "hub", false},
		{"https://example.com/app/hub/", "hub", true},
		{"https://example.com/mercure/mercure", "mercure", true},
		{"https://example.com/%6Dercure/mercure", "mercure", true},
		{"https://example.com/%61pp/./h%75b", "hub", false},
		{"https://example.com/hub@1", "", false},
		{"https://example.com/hub%2F", "", false},
		{"https://example.com/hub//", "", false},
	} {
		f := mustNew(t, tc.hub).filter
		if f.token != tc.token || f.dirHasToken != tc.dirHasToken {
			t.Errorf("hub %q: token %q, dirHasToken %v; want %q, %v", tc.hub, f.token, f.dirHasToken, tc.token, tc.dirHasToken)
		}
	}

	// The filter answers for these topics without parsing.
	r := mustNew(t, defaultHub)
	for _, topic := range []string{
		"https://example.com/books/1", "books/1", "/books/1", "urn:uuid:1", "https:books/1", "//h/x",
		"mercur", "%6Dercur", "%6Dercur%2565", "https://example.com/merc\x01ure",
	} {
		if r.filter.mayBeReserved(topic) {
			t.Errorf("mayBeReserved(%q) = true", topic)
		}
	}
	for _, topic := range []string{
		"", " ", "?x", "#", "https:", "HTTPS:?x", "ht\ttps:#", "mercure", "%6Dercure", "merc\tu%72e",
		"/.well-known/mercure", "x/mercure-books",
	} {
		if !r.filter.mayBeReserved(topic) {
			t.Errorf("mayBeReserved(%q) = false", topic)
		}
	}
	// With the token in the hub URL's directory, relative references are
	// parsed, while absolute ones are not.
	r = mustNew(t, "https://example.com/hub/")
	if !r.filter.mayBeReserved("x") || !r.filter.mayBeReserved("https:x") || r.filter.mayBeReserved("/x") || r.filter.mayBeReserved("http:x") {
		t.Error("filter with the token in the hub URL's directory")
	}
	if !r.Reserved("x") {
		t.Error(`hub "https://example.com/hub/": Reserved("x") = false`)
	}
}

func TestReservedFilterNoAlloc(t *testing.T) {
	r := mustNew(t, defaultHub)
	for _, topic := range []string{"https://example.com/books/1", "books/1", "/a%20b/%6Dercur\tx", "urn:uuid:1"} {
		if n := testing.AllocsPerRun(100, func() { r.Reserved(topic) }); n != 0 {
			t.Errorf("Reserved(%q) allocates %v times", topic, n)
		}
	}
}

func BenchmarkReserved(b *testing.B) {
	r := mustNew(b, defaultHub)
	for _, bc := range []struct{ name, topic string }{
		{"absolute", "https://example.com/books/1"},
		{"relative", "books/1"},
		{"absolute-reserved", "https://example.com/.well-known/%6Dercure/../mercure/subscriptions/x"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Reserved(bc.topic)
			}
		})
	}
}

func BenchmarkResolve(b *testing.B) {
	r := mustNew(b, defaultHub)
	for _, bc := range []struct{ name, topic string }{
		{"absolute", "https://example.com/books/1"},
		{"relative", "books/1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Resolve(bc.topic)
			}
		})
	}
}
