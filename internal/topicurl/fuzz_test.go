package topicurl

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	whatwg "github.com/nlnwa/whatwg-url/url"
)

// refNormalize is a deliberately naive reference implementation of PUB-6
// steps 3 and 4, used to cross-check normalizePath.
func refNormalize(p string) string {
	p = escapeRE.ReplaceAllStringFunc(p, func(esc string) string {
		n, err := strconv.ParseUint(esc[1:], 16, 8)
		if err != nil {
			panic(err)
		}
		if c := string(rune(n)); strings.Contains(unreservedChars, c) {
			return c
		}
		return esc
	})

	// RFC 3986, section 5.2.4, transcribed literally.
	in, out := p, ""
	removeLast := func() {
		if i := strings.LastIndex(out, "/"); i >= 0 {
			out = out[:i]
		} else {
			out = ""
		}
	}
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = strings.TrimPrefix(in, "../")
		case strings.HasPrefix(in, "./"):
			in = strings.TrimPrefix(in, "./")
		case strings.HasPrefix(in, "/./"):
			in = "/" + strings.TrimPrefix(in, "/./")
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = "/" + strings.TrimPrefix(in, "/../")
			removeLast()
		case in == "/..":
			in = "/"
			removeLast()
		case in == "." || in == "..":
			in = ""
		default:
			seg := in
			if i := strings.Index(in[1:], "/"); i >= 0 {
				seg = in[:i+1]
			}
			out += seg
			in = in[len(seg):]
		}
	}
	return out
}

var escapeRE = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)

const unreservedChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"

// FuzzReserved checks that Reserved and Resolve never panic, and that
// Reserved(topic) holds iff the PUB-6 property holds for the path obtained
// by an independent parse of topic and the reference normalization.
//
// Run with: go test -run='^$' -fuzz='^FuzzReserved$' -fuzztime=20s ./internal/topicurl
func FuzzReserved(f *testing.F) {
	for _, tc := range reservedCases {
		f.Add(tc.topic)
	}
	for _, s := range []string{"%2e%2E/", "foo:./", "file:c:/../", "http://[::1]/", "\\\\x\\.well-known", "/%zz/%", "\xff/é"} {
		f.Add(s)
	}

	r := mustNew(f, defaultHub)
	const hubPath = "/.well-known/mercure"

	f.Fuzz(func(t *testing.T, topic string) {
		got := r.Reserved(topic) // must not panic

		u, ok := r.Resolve(topic)
		if ok != (u != URL{}) {
			t.Fatalf("Resolve(%q) = %+v, %v", topic, u, ok)
		}

		if len(topic) > MaxTopicLength {
			if !got || ok {
				t.Fatalf("over-long topic: Reserved = %v, Resolve ok = %v", got, ok)
			}
			return
		}

		var want bool
		if p, ok := refParse(topic); ok {
			if p.Href(false) != u.Href || p.Pathname() != u.Pathname {
				t.Fatalf("Resolve(%q) = %+v, independent parse gives %q", topic, u, p.Href(false))
			}
			path := refNormalize(p.Pathname())
			if n := normalizePath(p.Pathname()); n != path {
				t.Fatalf("normalizePath(%q) = %q, reference gives %q", p.Pathname(), n, path)
			}
			// Not idempotent by design (decoding is a single pass, so
			// "%2%65" becomes "%2e"), but dot segments never survive.
			if hasDotSegment(path) {
				t.Fatalf("normalizePath(%q) = %q has a dot segment", p.Pathname(), path)
			}
			want = path == hubPath || strings.HasPrefix(path, hubPath+"/")
		} else if u != (URL{}) {
			t.Fatalf("Resolve(%q) succeeded, independent parse failed", topic)
		}
		if got != want {
			t.Fatalf("Reserved(%q) = %v, want %v", topic, got, want)
		}
	})
}

// refParse parses topic against defaultHub with a fresh parser, treating a
// panic as a failure.
func refParse(topic string) (u *whatwg.Url, ok bool) {
	defer func() {
		if recover() != nil {
			u, ok = nil, false
		}
	}()
	u, err := whatwg.ParseRef(defaultHub, topic)
	return u, err == nil && u != nil
}

// filterHubs are the hub URLs FuzzReservedFilter checks the pre-filter with.
var filterHubs = []string{
	defaultHub,
	"https://example.com/app/hub",
	"https://example.com/mercure/mercure",   // the directory holds the token
	"https://example.com/app/hub/",          // same, through the trailing slash
	"http://example.com/%61pp/h%75b",        // escaped token, http scheme
	"https://example.com/x/aabaab",          // exercises the KMP failure function
	"https://example.com/a/b",               // one-letter token
	"https://example.com/%2e%2e%2e",         // token "..."
	"https://example.com/hub@1",             // "@" is not unreserved: no filter
	"https://example.com/.well-known/hub//", // empty last segment: no filter
}

// filterSeeds are tricky topics for the pre-filter: references that inherit
// the hub URL's path, tab/CR/LF and escapes splitting the token, and so on.
var filterSeeds = []string{
	"", " ", "\t", "\x01", "\x00 \x1f", "?", "#", "?x", "#x", " ?x ", "\t#",
	"https:", "https:?x", "HTTPS:#x", "hTTps:\t", "ht\ttps:", "https: ", "https:\x01",
	"https:x", "https:\x01x", "https:\x01/x", "https:/x", "https:\\x", "https://h/x",
	"https:\\\\h/x", "https:/\\h/x", "http:", "http:x", "http:?x", "https :", "1https:",
	"https", "https\x01:", "wss:", "file:", "file:mercure", "foo:", "foo:?x",
	".", "..", "./", "../", "./?x", "../#", "%2e", "%2E%2e", ".%2e/",
	"mercure", "%6dercure", "%6Dercure", "%6\tDercure", "%\n6Dercure", "mer\r\ncure",
	"%%36Dercure", "%6Dercur%65", "%4mercure", "\\mercure\\mercure", "//mercure",
	"/%2e%2e/mercure/mercure", "foo:mercure", "foo:/mercure", "foo://h/mercure",
	"hub", "h%75b", "H%75B", "%68ub", "app/hub", "hub@1", "hub%401",
	"aabaab", "aabaabaab", "aaabaab", "aab%61ab", "b", "%62", "...", "%2e..", ".%2e.",
	"x", "x/", "/", "\\", "//", "\xff", "\xffmercure", "é/mercure",
	"https://example.com/books/1", "books/1", "urn:uuid:1",
	"/\xb3\xb3\xb300%6b000000", // "b" only before decoding
}

// FuzzReservedFilter checks that the pre-filter never changes what Reserved
// returns: for several hub URLs, Reserved must agree with reservedSlow, which
// always parses. It also checks the filter's two parts on their own:
// containsToken against decodeUnreserved, and inheritedPath against the
// parser.
//
// Run with: go test -run='^$' -fuzz=FuzzReservedFilter -fuzztime=60s ./internal/topicurl
func FuzzReservedFilter(f *testing.F) {
	for _, tc := range reservedCases {
		f.Add(tc.topic)
	}
	for _, s := range filterSeeds {
		f.Add(s)
	}

	var rs []*Resolver
	for _, hub := range filterHubs {
		rs = append(rs, mustNew(f, hub))
	}
	// Two hub URLs that differ only in their path, whose segments are
	// unlikely to appear in a topic.
	const dir1, last1, dir2, last2 = "zq9dir", "zq9last", "zq8dir", "zq8last"
	r1 := mustNew(f, "https://example.com/"+dir1+"/"+last1)
	r2 := mustNew(f, "https://example.com/"+dir2+"/"+last2)

	f.Fuzz(func(t *testing.T, topic string) {
		for i, r := range rs {
			if got, want := r.Reserved(topic), r.reservedSlow(topic); got != want {
				t.Fatalf("hub %q: Reserved(%q) = %v, reservedSlow = %v", filterHubs[i], topic, got, want)
			}
			if tok := r.filter.token; tok != "" {
				stripped := strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(topic)
				want := strings.Contains(decodeUnreserved(stripped), tok)
				if got := r.filter.containsDecoded(topic); got != want {
					t.Fatalf("containsDecoded(%q) with token %q = %v, want %v", topic, tok, got, want)
				}
				if want && !r.filter.containsToken(topic) {
					t.Fatalf("containsToken(%q) with token %q = false", topic, tok)
				}
			}
		}

		if len(topic) > MaxTopicLength {
			return
		}
		u1, ok1 := r1.Resolve(topic)
		u2, ok2 := r2.Resolve(topic)
		if ok1 != ok2 {
			t.Fatalf("Resolve(%q): ok %v against %q, %v against %q", topic, ok1, dir1, ok2, dir2)
		}
		if !ok1 {
			return
		}
		switch inh := inheritedPath(topic, "https"); inh {
		case inheritNone:
			if u1.Pathname != u2.Pathname {
				t.Fatalf("inheritedPath(%q) = none, but paths are %q and %q", topic, u1.Pathname, u2.Pathname)
			}
		case inheritDir:
			if strings.Contains(u1.Pathname, last1) && !strings.Contains(topic, last1) {
				t.Fatalf("inheritedPath(%q) = dir, but path is %q", topic, u1.Pathname)
			}
		}
	})
}
