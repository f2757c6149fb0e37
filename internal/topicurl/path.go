package topicurl

import "strings"

// normalizePath decodes percent-encoded unreserved characters in p and then
// removes dot segments. It returns p itself (without allocating) when there
// is nothing to do, which is the common case.
func normalizePath(p string) string {
	p = decodeUnreserved(p)
	if hasDotSegment(p) {
		p = removeDotSegments(p)
	}
	return p
}

// decodeUnreserved decodes the %XX escapes of s that stand for RFC 3986
// unreserved characters (A–Z a–z 0–9 - . _ ~); hex digits may be in either
// case. Every other escape, and every malformed one, is left untouched.
// Decoding is a single pass: "%252E" stays "%252E".
func decodeUnreserved(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b []byte // allocated at the first escape that gets decoded
	last := 0    // s[last:i] has not been copied to b yet
	for ; i < len(s); i++ {
		if s[i] != '%' || i+2 >= len(s) {
			continue
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			continue
		}
		c := hi<<4 | lo
		if !isUnreserved(c) {
			continue
		}
		if b == nil {
			b = make([]byte, 0, len(s))
		}
		b = append(b, s[last:i]...)
		b = append(b, c)
		last = i + 3
		i += 2
	}
	if b == nil {
		return s
	}
	b = append(b, s[last:]...)
	return string(b)
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// isUnreserved reports whether c is an RFC 3986 unreserved character.
func isUnreserved(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '-' || c == '.' || c == '_' || c == '~'
}

// hasDotSegment reports whether one of the "/"-separated segments of p is
// "." or "..".
func hasDotSegment(p string) bool {
	for len(p) > 0 {
		seg := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			seg, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// removeDotSegments implements the remove_dot_segments algorithm of
// RFC 3986, section 5.2.4.
func removeDotSegments(in string) string {
	out := make([]byte, 0, len(in))
	for len(in) > 0 {
		switch {
		// A: drop a leading "../" or "./".
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		// B: replace a leading "/./" or a complete "/." with "/".
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		// C: replace a leading "/../" or a complete "/.." with "/" and drop
		// the last segment of the output.
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			out = dropLastSegment(out)
		case in == "/..":
			in = "/"
			out = dropLastSegment(out)
		// D: drop a complete "." or "..".
		case in == "." || in == "..":
			in = ""
		// E: move the first segment, with its leading "/" if any, to the
		// output.
		default:
			start := 0
			if in[0] == '/' {
				start = 1
			}
			n := len(in)
			if j := strings.IndexByte(in[start:], '/'); j >= 0 {
				n = start + j
			}
			out = append(out, in[:n]...)
			in = in[n:]
		}
	}
	return string(out)
}

// dropLastSegment removes the last segment of out and the "/" before it, if
// any.
func dropLastSegment(out []byte) []byte {
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] == '/' {
			return out[:i]
		}
	}
	return out[:0]
}
