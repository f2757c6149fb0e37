package topicurl

import "strings"

// Most topics are absolute URLs already in the form the WHATWG parser
// serializes them to ("https://example.com/books/1"): parsing such a topic
// gives it back unchanged, and its components are substrings of it. The
// parser takes tens of microseconds on a topic of a few hundred bytes (it
// allocates per code point), more than the rest of a publish; resolving
// recognizes these topics with one scan instead, and parses the others.
//
// resolveCanonical accepts only what it can tell, byte by byte, that the
// basic URL parser leaves as it is; anything else (a port equal to the
// scheme's default, userinfo, an IP address or an internationalized host,
// a byte the parser percent-encodes, a dot segment, a backslash, an empty
// query...) goes to the parser. FuzzResolveCanonical checks it against the
// parser.

// defaultPorts are the special schemes but file, with their default port:
// the parser drops a port equal to it.
var defaultPorts = [...]struct{ scheme, port string }{
	{"https", "443"}, {"http", "80"}, {"wss", "443"}, {"ws", "80"}, {"ftp", "21"},
}

// resolveCanonical returns the components of topic when it is an absolute
// URL of a special scheme in canonical form, without parsing it.
func resolveCanonical(topic string) (URL, bool) {
	var u URL
	defaultPort := ""
	for _, s := range defaultPorts {
		if len(topic) > len(s.scheme)+3 && topic[:len(s.scheme)] == s.scheme && topic[len(s.scheme):len(s.scheme)+3] == "://" {
			u.Scheme, defaultPort = s.scheme, s.port
			break
		}
	}
	if u.Scheme == "" {
		return URL{}, false
	}
	rest := topic[len(u.Scheme)+3:]
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return URL{}, false // the parser adds the path "/"
	}
	host := rest[:slash]
	if i := strings.IndexByte(host, ':'); i >= 0 {
		host, u.Port = host[:i], host[i+1:]
		if !canonicalPort(u.Port) || u.Port == defaultPort {
			return URL{}, false
		}
	}
	if !canonicalHost(host) {
		return URL{}, false
	}
	u.Hostname = host
	rest = rest[slash:]
	end := canonicalPrefix(rest, &pathBytes)
	u.Pathname = rest[:end]
	if !canonicalSegments(u.Pathname) {
		return URL{}, false
	}
	rest = rest[end:]
	if q, ok := strings.CutPrefix(rest, "?"); ok {
		end := canonicalPrefix(q, &queryBytes)
		u.Query, rest = q[:end], q[end:]
		if u.Query == "" {
			return URL{}, false
		}
	}
	if f, ok := strings.CutPrefix(rest, "#"); ok {
		if end := canonicalPrefix(f, &fragmentBytes); f == "" || end != len(f) {
			return URL{}, false
		}
		u.Fragment, rest = f, ""
	}
	if rest != "" {
		return URL{}, false // a byte that none of the sets accepts
	}
	u.Href = topic
	return u, true
}

// canonicalPort reports whether p is a port number as the parser
// serializes it: decimal digits without a leading zero, at most 65535.
func canonicalPort(p string) bool {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
		n = n*10 + int(p[i]-'0')
	}
	return n <= 65535
}

// canonicalHost reports whether h is a domain that the host parser keeps
// as it is: dot-separated labels of lowercase ASCII letters, digits and
// hyphens, none empty, none an A-label (xn--, which IDNA decodes and
// checks), and a last label that starts with a letter (one that is a
// number makes the host an IPv4 address).
func canonicalHost(h string) bool {
	if h == "" {
		return false
	}
	start := 0 // of the current label
	for i := 0; i <= len(h); i++ {
		if i < len(h) && h[i] != '.' {
			c := h[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
			continue
		}
		label := h[start:i]
		if label == "" || strings.HasPrefix(label, "xn--") {
			return false
		}
		if i == len(h) && !('a' <= label[0] && label[0] <= 'z') {
			return false
		}
		start = i + 1
	}
	return true
}

// canonicalSegments reports whether p, a path that starts with "/",
// holds no dot segment, which the parser removes.
func canonicalSegments(p string) bool {
	for i := 0; i < len(p); i++ {
		// A dot segment starts with "." or "%" (of %2e), after a "/".
		if p[i] != '/' || i+1 == len(p) || p[i+1] != '.' && p[i+1] != '%' {
			continue
		}
		seg := p[i+1:]
		if j := strings.IndexByte(seg, '/'); j >= 0 {
			seg = seg[:j]
		}
		if isDotSegment(seg) {
			return false
		}
	}
	return true
}

// isDotSegment reports whether seg is ".", ".." or one of them with dots
// written %2e or %2E.
func isDotSegment(seg string) bool {
	if len(seg) > 6 {
		return false
	}
	for _, d := range [...]string{".", "%2e", "..", ".%2e", "%2e.", "%2e%2e"} {
		if strings.EqualFold(seg, d) {
			return true
		}
	}
	return false
}

// canonicalPrefix returns the length of the longest prefix of s made of
// bytes that set accepts and of escapes (a percent sign and two hex
// digits): the parser keeps that much of a component as it is.
func canonicalPrefix(s string, set *[256]bool) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return i
			}
			i += 2
			continue
		}
		if !set[c] {
			return i
		}
	}
	return len(s)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f'
}

// The bytes that a special URL's components keep as they are. A path
// keeps the unreserved characters, the sub-delimiters, ":", "@" and "/";
// the parser percent-encodes others, reads some as separators ("", "?",
// "#"), and the rest ("[", "]", "|", "^") are left out to stay clear of
// the standard's changes. A query keeps the same but "'" (encoded there)
// and "?"; a fragment the same as a path and "?".
var pathBytes, queryBytes, fragmentBytes = byteSet("'"), byteSet("?"), byteSet("'?")

// byteSet returns the set of the bytes that a path keeps, and extra.
func byteSet(extra string) (set [256]bool) {
	for c := range set {
		set[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	for _, c := range []byte("-._~!$&()*+,;=:@/" + extra) {
		set[c] = true
	}
	return set
}
