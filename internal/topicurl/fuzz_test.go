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
// Run with: go test -run='^$' -fuzz=FuzzReserved -fuzztime=20s ./internal/topicurl
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
