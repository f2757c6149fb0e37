package index

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dunglas/go-urlpattern"

	"github.com/mercurekit/mercure/internal/topicurl"
	"github.com/mercurekit/mercure/internal/uritemplate"
)

// ErrPattern reports a URL pattern that does not compile (or that the
// engine cannot evaluate in linear time, MAT-9).
var ErrPattern = errors.New("invalid URL pattern")

// Pattern is a compiled URL pattern or URI template (see
// [CompileTemplate]), immutable and safe for concurrent use.
type Pattern struct {
	raw string
	// key interns the pattern: raw for a URL pattern, templateKey(raw)
	// for a URI template, so that the same text read both ways gives two
	// patterns.
	key  string
	cost Cost
	// m evaluates the pattern; p is the engine's compiled pattern, kept
	// only for a pattern that m cannot evaluate (see [newURLMatcher]).
	m        *urlMatcher
	p        *urlpattern.URLPattern
	tpl      *uritemplate.Template // a URI template, instead of m and p
	resolver *topicurl.Resolver
	// keys is the literal prefix of the pattern used to place it in the
	// trie: the lowercase scheme, then the hostname, then leading path
	// segments (the first is "" for a path that starts with "/"). A
	// pattern only needs evaluating for topics whose URL has the same
	// leading components.
	keys []string
	// tail, when set, is the last segment of every topic the pattern
	// matches, found in its literal text: a pattern only needs evaluating
	// for topics that end so (see [tailKey]).
	tail    tailKey
	hasTail bool
}

// tailKey is the last segment of a topic, the text after the last "/":
// of its pathname for URL patterns, of its whole URL for URI templates,
// which match it whole.
type tailKey struct {
	href bool
	seg  string
}

// topicTails returns the tail keys of the resolved topic u, one of each
// kind.
func topicTails(u *topicurl.URL) (path, href tailKey) {
	return tailKey{seg: u.Pathname[strings.LastIndexByte(u.Pathname, '/')+1:]},
		tailKey{href: true, seg: u.Href[strings.LastIndexByte(u.Href, '/')+1:]}
}

// Key returns what the pattern is interned by: two patterns with the same
// key are the same.
func (p *Pattern) Key() string { return p.key }

// Raw returns the pattern as the subscriber wrote it.
func (p *Pattern) Raw() string { return p.raw }

// Cost returns the pattern's estimated cost (see [EstimateCost]).
func (p *Pattern) Cost() Cost { return p.cost }

// Compile compiles a URL pattern (MAT-6): absolute patterns without a base,
// so that non-special schemes keep their own path (urn:* must match
// urn:isbn:1), relative ones against hubURL, which r resolves topics
// against. IgnoreCase stays off (MAT-7).
func Compile(raw, hubURL string, r *topicurl.Resolver) (*Pattern, error) {
	cost, err := EstimateCost(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrPattern, raw)
	}
	return compile(raw, cost, hubURL, r)
}

// compile is Compile for a pattern whose cost is estimated already.
func compile(raw string, cost Cost, hubURL string, r *topicurl.Resolver) (pat *Pattern, err error) {
	defer func() {
		// The engine sees subscriber input; a panic in it must not take the hub down.
		if recover() != nil {
			pat, err = nil, fmt.Errorf("%w: %q", ErrPattern, raw)
		}
	}()
	p, err := urlpattern.New(raw, "", nil)
	if errors.Is(err, urlpattern.ErrNoBaseURL) {
		p, err = urlpattern.New(raw, hubURL, nil)
	}
	if err != nil {
		// The engine's errors print its internal state: never echo them.
		return nil, fmt.Errorf("%w: %q", ErrPattern, raw)
	}
	pat = &Pattern{raw: raw, key: raw, cost: cost, resolver: r, keys: literalPrefix(p)}
	if m, ok := newURLMatcher(p); ok {
		pat.m = m // the engine's compiled state can go
		pat.tail.seg, pat.hasTail = m.pathTail()
	} else {
		pat.p = p
	}
	return pat, nil
}

// MatchTopic reports whether topic, resolved against the hub URL, matches
// the pattern; a topic that does not parse as a URL never does (MAT-8).
func (p *Pattern) MatchTopic(topic string) bool {
	u, ok := p.resolver.Resolve(topic)
	return ok && p.TestURL(&u)
}

// Test reports whether the resolved absolute URL href matches the pattern.
// It parses href: to test a topic against several patterns, resolve it
// once and call [Pattern.TestURL].
func (p *Pattern) Test(href string) bool {
	if p.m != nil {
		u, ok := topicurl.ParseAbsolute(href)
		return ok && p.TestURL(&u)
	}
	return p.TestURL(&topicurl.URL{Href: href})
}

// TestURL reports whether the resolved topic u matches the pattern,
// without parsing it again: a URL pattern tests u's components, a URI
// template its Href.
func (p *Pattern) TestURL(u *topicurl.URL) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // MAT-8/MAT-9: any failure is "no match"
		}
	}()
	switch {
	case p.tpl != nil:
		return p.tpl.Match(u.Href)
	case p.m != nil:
		return p.m.test(u)
	}
	return p.p.Test(u.Href, "")
}

// literalPrefix returns the trie keys of a compiled pattern: as many of
// scheme, hostname and path segments as are plain literals, stopping at
// the first component that holds any pattern syntax.
func literalPrefix(p *urlpattern.URLPattern) []string {
	proto := p.Protocol()
	if !isLiteral(proto, schemeByte) {
		return nil
	}
	keys := []string{strings.ToLower(proto)}
	host := p.Hostname()
	if !isLiteral(host, hostByte) {
		return keys
	}
	keys = append(keys, host)
	path := p.Pathname()
	for seg := range strings.SplitSeq(path, "/") {
		// An empty segment past the first is "//", whose second slash
		// may be the prefix of the group that follows: optional with it
		// ("//*" matches "/x"), so no key.
		if seg == "." || seg == ".." || seg == "" && len(keys) > 2 || !isLiteral(seg, segmentByte) {
			break
		}
		keys = append(keys, seg)
	}
	return keys
}

func isLiteral(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func schemeByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '.' || b == '-'
}

// hostByte accepts only what a canonical host name is made of; an upper
// case letter means the pattern engine did not canonicalize it, so we
// do not trust it as a key.
func hostByte(b byte) bool {
	return 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '.' || b == '-'
}

// segmentByte accepts unreserved characters and percent escapes, which
// the pattern compiler and the URL parser serialize identically.
func segmentByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~' || b == '%'
}
