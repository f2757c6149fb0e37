// Package topicurl resolves Mercure topics against the hub's public URL
// using the WHATWG URL Standard parser, and decides whether a topic lies in
// the hub's reserved namespace (PUB-6).
//
// Go's net/url does not follow the WHATWG URL Standard (it keeps
// backslashes, tabs and dot segments, does not apply IDNA, and so on), so
// this package relies on github.com/nlnwa/whatwg-url instead. Topics are
// attacker-controlled input: every call into the parser is guarded by
// recover, and a panic is treated as a parse failure.
package topicurl

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	whatwg "github.com/nlnwa/whatwg-url/url"
)

// MaxTopicLength is the length in bytes above which a topic is not handed
// to the WHATWG parser. The parser takes quadratic time on some inputs (for
// instance a long run of "a@" in the authority costs about 3 ms at 2 KiB and
// over 2 s at 64 KiB), so longer topics are rejected without parsing:
// Resolve reports them as unparsable and Reserved fails closed, reporting
// them as reserved. Callers that want a clearer error can check the length
// themselves first.
const MaxTopicLength = 2048

// Resolver resolves topics against a hub URL. It is safe for concurrent use.
type Resolver struct {
	// base is the parsed hub URL. It is never modified after New returns;
	// the parser only reads it (it clones the base for every parse).
	base *whatwg.Url
	// hubPath is the normalized path of the hub URL, without a trailing
	// slash. It is never empty and always starts with "/".
	hubPath string
	// filter lets Reserved skip the parser for most topics.
	filter filter
}

// New returns a Resolver for the absolute hub URL hubURL (e.g.
// "https://example.com/.well-known/mercure"). hubPath is the path of hubURL.
//
// hubURL must use the http or https scheme. Its path is normalized like a
// topic path (see Reserved) and a single trailing slash is dropped, so
// "https://example.com/hub/" reserves "/hub" and "/hub/…". A hub URL whose
// path normalizes to "/" is rejected, because every hierarchical topic path
// would then be reserved.
func New(hubURL string) (*Resolver, error) {
	p := whatwg.NewParser()
	base, err := parseHub(p, hubURL)
	if err != nil {
		return nil, fmt.Errorf("topicurl: invalid hub URL %q: %w", hubURL, err)
	}
	if s := base.Scheme(); s != "http" && s != "https" {
		return nil, fmt.Errorf("topicurl: hub URL %q: scheme must be http or https", hubURL)
	}

	hubPath := normalizePath(base.Pathname())
	if len(hubPath) > 1 {
		hubPath = strings.TrimSuffix(hubPath, "/")
	}
	if hubPath == "/" || !strings.HasPrefix(hubPath, "/") {
		return nil, fmt.Errorf("topicurl: hub URL %q: path must not be the root", hubURL)
	}

	// The parser clones the base URL on every call, and Url.Clone lazily
	// initializes the base's search parameters. Initialize them here, while
	// the Resolver is not shared yet, so that later clones only read base.
	base.SearchParams()

	return &Resolver{base: base, hubPath: hubPath, filter: newFilter(base, hubPath)}, nil
}

// Reserved reports whether topic lies in the hub's reserved namespace (PUB-6).
//
// The topic is parsed as a URL reference relative to the hub URL (a topic
// that does not parse is not reserved). Percent-encoded unreserved
// characters (A–Z a–z 0–9 - . _ ~) in the resulting path are decoded, dot
// segments are removed (RFC 3986, section 5.2.4), and the topic is reserved
// iff that path equals the hub path or starts with the hub path followed by
// "/". Scheme, host and port are ignored.
//
// A topic longer than MaxTopicLength is not parsed and is reported as
// reserved. Most other topics that are not reserved are recognized without
// parsing, by a conservative pre-filter (see filter).
func (r *Resolver) Reserved(topic string) bool {
	if len(topic) > MaxTopicLength {
		return true
	}
	if !r.filter.mayBeReserved(topic) {
		return false
	}
	return r.reservedSlow(topic)
}

// reservedSlow is Reserved without the pre-filter: it always parses topic.
func (r *Resolver) reservedSlow(topic string) bool {
	if len(topic) > MaxTopicLength {
		return true
	}
	u, ok := r.parse(topic)
	if !ok {
		return false
	}
	return r.reservedPath(normalizePath(u.Pathname()))
}

// reservedPath reports whether the normalized path p is the hub path or lies
// below it.
func (r *Resolver) reservedPath(p string) bool {
	return strings.HasPrefix(p, r.hubPath) &&
		(len(p) == len(r.hubPath) || p[len(r.hubPath)] == '/')
}

// filter is a cheap, conservative test run by Reserved before parsing: when
// mayBeReserved returns false, the topic is certainly not reserved.
//
// Why it is sound (PUB-6). Let token be the last segment of hubPath. A
// reserved topic's normalized path equals hubPath or starts with
// hubPath+"/", so one of its "/"-separated segments is exactly token.
// Removing dot segments only drops whole segments, and decoding works within
// a segment (an escape never spans "/", and "/" is not unreserved), so some
// segment S of the WHATWG path decodes to token. When token is made of
// unreserved characters only, S holds no "%" after decoding, so S holds no
// escape added by the parser (those encode spaces, controls, non-ASCII and
// the like, never unreserved characters). The parser builds path segments
// from runs of input between delimiters ("/", "\", "?", "#", ":" after the
// scheme, or the ends), after trimming C0 controls and spaces at both ends
// and removing tab, CR and LF, and it copies everything else from the hub
// URL's path: all of it for a reference that is empty or starts with "?" or
// "#" (also after the same special scheme, as in "https:?x"), all but the
// last segment for other relative-path references. No delimiter is a hex
// digit, so S decodes the same way in place, and the topic with tab, CR and
// LF removed contains token after decoding. Otherwise S was copied from the
// hub URL: mayBeReserved lets those cases through to the parser.
type filter struct {
	token  string // "" disables the filter
	next   []int  // KMP failure function of token
	scheme string // hub URL's scheme (http or https)
	// dirHasToken reports whether the hub URL's path without its last
	// segment contains token once decoded (e.g. "/mercure/mercure/" or
	// "/hub/"), so that relative-path references may inherit it.
	dirHasToken bool
}

// newFilter returns the filter for the parsed hub URL base, whose normalized
// path is hubPath. The filter is disabled when the last segment of hubPath is
// empty or holds a character that is not unreserved.
func newFilter(base *whatwg.Url, hubPath string) filter {
	token := hubPath[strings.LastIndexByte(hubPath, '/')+1:]
	if token == "" || token == "." || token == ".." {
		return filter{}
	}
	for i := range len(token) {
		if !isUnreserved(token[i]) {
			return filter{}
		}
	}
	next := make([]int, len(token))
	for i, k := 1, 0; i < len(token); i++ {
		for k > 0 && token[i] != token[k] {
			k = next[k-1]
		}
		if token[i] == token[k] {
			k++
		}
		next[i] = k
	}
	p := base.Pathname()
	dir := p[:strings.LastIndexByte(p, '/')+1]
	return filter{
		token:       token,
		next:        next,
		scheme:      base.Scheme(),
		dirHasToken: strings.Contains(decodeUnreserved(dir), token),
	}
}

// mayBeReserved reports false only if topic is certainly not reserved (see
// filter). It does not allocate.
func (f *filter) mayBeReserved(topic string) bool {
	if f.token == "" || f.containsToken(topic) {
		return true
	}
	switch inheritedPath(topic, f.scheme) {
	case inheritAll:
		return true
	case inheritDir:
		return f.dirHasToken
	}
	return false
}

// containsToken reports whether topic, once tab, CR and LF are removed and
// escapes of unreserved characters are decoded as by decodeUnreserved,
// contains f.token. It may also report true when only topic itself contains
// f.token (e.g. "b" in "%6b"), which is harmless.
func (f *filter) containsToken(topic string) bool {
	if strings.Contains(topic, f.token) {
		return true
	}
	if !strings.ContainsAny(topic, "%\t\n\r") {
		return false // nothing to decode or remove
	}
	return f.containsDecoded(topic)
}

// containsDecoded reports whether topic, once tab, CR and LF are removed and
// escapes of unreserved characters are decoded as by decodeUnreserved,
// contains f.token. It decodes on the fly and searches with the
// Knuth–Morris–Pratt algorithm, so it does not allocate.
func (f *filter) containsDecoded(topic string) bool {
	tok, k := f.token, 0 // tok[:k] matches the end of what was decoded
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if isTabOrNewline(c) {
			continue
		}
		if c == '%' {
			j1 := skipTabOrNewline(topic, i+1)
			j2 := skipTabOrNewline(topic, j1+1)
			if j2 < len(topic) {
				hi, ok1 := unhex(topic[j1])
				lo, ok2 := unhex(topic[j2])
				if d := hi<<4 | lo; ok1 && ok2 && isUnreserved(d) {
					c, i = d, j2
				}
			}
		}
		for k > 0 && tok[k] != c {
			k = f.next[k-1]
		}
		if tok[k] == c {
			k++
			if k == len(tok) {
				return true
			}
		}
	}
	return false
}

// What a reference takes from the hub URL's path when parsed against it.
const (
	inheritNone = iota // nothing
	inheritDir         // all segments but the last
	inheritAll         // the whole path
)

// inheritedPath tells, following the WHATWG basic URL parser, how much of
// the hub URL's path (whose scheme, http or https, is scheme) the WHATWG
// path of topic starts with. In doubt it answers inheritAll.
func inheritedPath(topic, scheme string) int {
	// Leading C0 controls and spaces are trimmed, trailing ones too (a
	// topic that is blank from some point on ends there), and tab, CR and
	// LF are removed everywhere.
	i := 0
	for i < len(topic) && topic[i] <= ' ' {
		i++
	}
	if isBlank(topic[i:]) {
		return inheritAll // empty reference
	}
	switch c := topic[i]; {
	case c == '?' || c == '#':
		return inheritAll
	case c == '/' || c == '\\':
		return inheritNone // path-absolute or scheme-relative
	case !isASCIIAlpha(c):
		return inheritDir // relative path
	}
	// A scheme is an ASCII letter followed by letters, digits, "+", "-"
	// and "." up to ":"; without ":" the topic is a relative path.
	same := true // topic[i:j] equals scheme so far, ignoring case
	n := 0       // letters of scheme matched
	j := i
	for ; j < len(topic); j++ {
		c := topic[j]
		if isTabOrNewline(c) {
			continue
		}
		if !isASCIIAlpha(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			break
		}
		same = same && n < len(scheme) && c|0x20 == scheme[n]
		n++
	}
	if isBlank(topic[j:]) || topic[j] != ':' {
		return inheritDir // no scheme: a relative path
	}
	if !same || n != len(scheme) {
		return inheritNone // another scheme: an absolute URL
	}
	// Same special scheme as the hub URL: without a following "/" or
	// "\", the rest is parsed as a relative reference.
	j = skipTabOrNewline(topic, j+1)
	if isBlank(topic[j:]) {
		return inheritAll
	}
	switch topic[j] {
	case '?', '#':
		return inheritAll
	case '/', '\\':
		return inheritNone
	}
	return inheritDir
}

// isBlank reports whether s holds only C0 controls and spaces, which the
// WHATWG parser trims when they end the input.
func isBlank(s string) bool {
	for i := range len(s) {
		if s[i] > ' ' {
			return false
		}
	}
	return true
}

func isTabOrNewline(c byte) bool { return c == '\t' || c == '\n' || c == '\r' }

// skipTabOrNewline returns the index of the first byte of s at or after i
// that is not a tab, CR or LF, or len(s).
func skipTabOrNewline(s string, i int) int {
	for i < len(s) && isTabOrNewline(s[i]) {
		i++
	}
	return i
}

func isASCIIAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// URL is a topic resolved against the hub URL: its serialization and its
// components, as the WHATWG URL parser gives them, so that URL patterns
// test them without parsing the topic again.
type URL struct {
	Href     string // serialized absolute URL
	Scheme   string // lowercase, without ":"
	Username string
	Password string
	Hostname string // canonical (lowercase / IDNA / IP serialization), "" when none
	Port     string // "" when none or the scheme's default
	Pathname string // as serialized by WHATWG (percent-encoded), e.g. "/books/1"
	Query    string // without "?"
	Fragment string // without "#"
}

// Resolve parses topic as a URL reference relative to the hub URL; ok is
// false when it does not parse (MAT-8: such a topic never matches a URL
// pattern). A topic longer than MaxTopicLength is not parsed: ok is false.
//
// Href includes the query and fragment, if any. Hostname is the WHATWG
// serialization of the host, so IPv6 addresses keep their brackets (e.g.
// "[::1]"). Pathname is not decoded or otherwise normalized beyond what the
// WHATWG parser does; for URLs with an opaque path (e.g. "urn:isbn:123") it
// is the opaque path ("isbn:123").
//
// A topic already in the canonical form of an absolute URL (see
// resolveCanonical) is recognized without running the parser: that
// costs one scan of it and no allocation.
func (r *Resolver) Resolve(topic string) (u URL, ok bool) {
	if len(topic) > MaxTopicLength {
		return URL{}, false
	}
	if u, ok := resolveCanonical(topic); ok {
		return u, true
	}
	return r.resolveSlow(topic)
}

// resolveSlow is Resolve without the canonical fast path: it always
// parses topic.
func (r *Resolver) resolveSlow(topic string) (URL, bool) {
	p, ok := r.parse(topic)
	if !ok {
		return URL{}, false
	}
	return components(p), true
}

// parses counts the runs of the WHATWG parser on topics and URLs (see
// [Parses]).
var parses atomic.Uint64

// Parses returns how many times the WHATWG parser has run on a topic or a
// URL, all resolvers together: the tests of the hub check with it that a
// topic is parsed once per update, however many URL patterns test it.
func Parses() uint64 { return parses.Load() }

// hrefParser parses absolute URLs, without a base (see [ParseAbsolute]).
var hrefParser = whatwg.NewParser()

// ParseAbsolute parses the absolute URL href, without a base, into its
// components, as the WHATWG basic URL parser does; ok is false when it
// does not parse. Unlike [Resolver.Resolve], it parses URLs of any
// length: it is for URLs that are already resolved.
func ParseAbsolute(href string) (u URL, ok bool) {
	if u, ok := resolveCanonical(href); ok {
		return u, true
	}
	defer func() {
		if recover() != nil {
			u, ok = URL{}, false
		}
	}()
	parses.Add(1)
	p, err := hrefParser.BasicParser(href, nil, nil, whatwg.NoState)
	if err != nil || p == nil {
		return URL{}, false
	}
	return components(p), true
}

// components returns the serialization and components of p.
func components(p *whatwg.Url) URL {
	return URL{
		Href:     p.Href(false),
		Scheme:   p.Scheme(),
		Username: p.Username(),
		Password: p.Password(),
		Hostname: p.Hostname(),
		Port:     p.Port(),
		Pathname: p.Pathname(),
		Query:    p.Query(),
		Fragment: p.Fragment(),
	}
}

// parse parses topic relative to the hub URL. ok is false if topic is longer
// than MaxTopicLength, or if the parser reports an error or panics.
func (r *Resolver) parse(topic string) (u *whatwg.Url, ok bool) {
	if len(topic) > MaxTopicLength {
		return nil, false
	}
	parses.Add(1)
	defer func() {
		if recover() != nil {
			u, ok = nil, false
		}
	}()
	u, err := r.base.Parse(topic)
	if err != nil || u == nil {
		return nil, false
	}
	return u, true
}

// parseHub parses the absolute URL hubURL with p, turning a panic into an
// error.
func parseHub(p whatwg.Parser, hubURL string) (u *whatwg.Url, err error) {
	defer func() {
		if v := recover(); v != nil {
			u, err = nil, fmt.Errorf("parser panic: %v", v)
		}
	}()
	u, err = p.Parse(hubURL)
	if err == nil && u == nil {
		err = errors.New("parser returned no URL")
	}
	return u, err
}
