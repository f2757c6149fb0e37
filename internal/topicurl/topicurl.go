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

	return &Resolver{base: base, hubPath: hubPath}, nil
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
// reserved.
func (r *Resolver) Reserved(topic string) bool {
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

// URL is a topic resolved against the hub URL.
type URL struct {
	Href     string // serialized absolute URL
	Scheme   string // lowercase, without ":"
	Hostname string // canonical (lowercase / IDNA / IP serialization), "" when none
	Pathname string // as serialized by WHATWG (percent-encoded), e.g. "/books/1"
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
func (r *Resolver) Resolve(topic string) (u URL, ok bool) {
	p, ok := r.parse(topic)
	if !ok {
		return URL{}, false
	}
	return URL{
		Href:     p.Href(false),
		Scheme:   p.Scheme(),
		Hostname: p.Hostname(),
		Pathname: p.Pathname(),
	}, true
}

// parse parses topic relative to the hub URL. ok is false if topic is longer
// than MaxTopicLength, or if the parser reports an error or panics.
func (r *Resolver) parse(topic string) (u *whatwg.Url, ok bool) {
	if len(topic) > MaxTopicLength {
		return nil, false
	}
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
