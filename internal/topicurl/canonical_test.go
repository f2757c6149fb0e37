package topicurl

import (
	"strings"
	"testing"
)

// canonicalSeeds are topics at the edges of what resolveCanonical
// accepts: each side of each rule.
var canonicalSeeds = []string{
	"https://example.com/books/1", "http://example.com/", "wss://example.com/r", "ws://a/b", "ftp://a.b/c",
	"file://host/x", "urn:isbn:1", "HTTPS://example.com/x", "https:/example.com/x", "https://example.com",
	"https://example.com?x", "https://example.com#x", "https://Example.com/x", "https://example.com./x",
	"https://.example.com/x", "https://example..com/x", "https://xn--caf-dma.com/x", "https://a.xn--p1ai/x",
	"https://1.2.3.4/x", "https://a.1/x", "https://a.0x1f/x", "https://a.1a/x", "https://a.a1/x", "https://a-.-b/x",
	"https://" + strings.Repeat("a", 64) + ".com/x", "https://" + strings.Repeat("a.", 130) + "com/x",
	"https://[::1]/x", "https://u@example.com/x", "https://u:p@example.com/x", "https://example.com:443/x",
	"https://example.com:80/x", "http://example.com:80/x", "ftp://example.com:21/x", "https://example.com:0443/x",
	"https://example.com:65535/x", "https://example.com:65536/x", "https://example.com:/x", "https://example.com:8a/x",
	"https://example.com/a b", "https://example.com/a\tb", "https://example.com/a\\b", "https://example.com/é",
	"https://example.com/a%20b", "https://example.com/a%2", "https://example.com/a%zz", "https://example.com/%",
	"https://example.com/.", "https://example.com/./x", "https://example.com/a/..", "https://example.com/%2e/x",
	"https://example.com/%2E%2e/x", "https://example.com/.%2E", "https://example.com/...", "https://example.com/.x",
	"https://example.com/a..", "https://example.com//x", "https://example.com/a'b", "https://example.com/a[b]",
	"https://example.com/a|b", "https://example.com/a^b", "https://example.com/a`b", "https://example.com/{a}",
	"https://example.com/a\"b", "https://example.com/a<b>", "https://example.com/x?", "https://example.com/x#",
	"https://example.com/x?#", "https://example.com/x?a=1&b='2'", "https://example.com/x?a=1/?b",
	"https://example.com/x#a?b/c", "https://example.com/x#a'b", "https://example.com/x#a#b", "https://example.com/x?a#b",
	"https://example.com/x?a b", "https://example.com/x#a b", "https://example.com/x?%41", "https://example.com/x#%zz",
	"https://example.com/!$&'()*+,;=:@-._~", " https://example.com/x", "https://example.com/x ",
	"https://example.com/x\n", "https://exa\nmple.com/x", "https://example.com/x\x00",
}

// FuzzResolveCanonical checks that Resolve, which takes topics in
// canonical form without parsing them, gives what the parser gives.
func FuzzResolveCanonical(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add(s)
	}
	for _, tc := range reservedCases {
		f.Add(tc.topic)
	}
	r := mustNew(f, defaultHub)
	f.Fuzz(func(t *testing.T, topic string) {
		checkCanonical(t, r, topic)
	})
}

func checkCanonical(t *testing.T, r *Resolver, topic string) {
	t.Helper()
	got, ok := r.Resolve(topic)
	want, wok := r.resolveSlow(topic)
	if ok != wok || got != want {
		t.Fatalf("%q: Resolve %+v (%v), parser %+v (%v)", topic, got, ok, want, wok)
	}
}

// TestResolveCanonical checks the seeds against the parser, and that
// topics in canonical form take the fast path, without allocating.
func TestResolveCanonical(t *testing.T) {
	r := mustNew(t, defaultHub)
	for _, s := range canonicalSeeds {
		checkCanonical(t, r, s)
	}
	for _, topic := range []string{
		"https://example.com/books/1", "http://localhost:3000/users/42/books?page=2#top",
		"https://api.example.com/a/b/c/" + strings.Repeat("p", 600) + "/x", "wss://example.com/rooms/1:2@x",
	} {
		if _, ok := resolveCanonical(topic); !ok {
			t.Errorf("%q: not recognized as canonical", topic)
		}
		if n := testing.AllocsPerRun(100, func() { r.Resolve(topic) }); n != 0 {
			t.Errorf("Resolve(%q) allocates %v times", topic, n)
		}
	}
}
