// Package form decodes application/x-www-form-urlencoded data exactly as the
// WHATWG URL standard's urlencoded parser (URLSearchParams) does, except that
// it returns the decoded bytes as they are instead of replacing invalid UTF-8
// with U+FFFD (requirement SUB-5). Callers validate the strings themselves.
//
// Unlike net/url.ParseQuery, it keeps pairs containing ';' and pairs with a
// malformed percent sequence (the '%' stays literal), and it preserves the
// input order of all pairs, repeated names included.
package form

import (
	"strings"
	"unsafe"
)

// Pair is one decoded name/value pair, in input order.
type Pair struct{ Name, Value string }

// Parse decodes s as application/x-www-form-urlencoded per the WHATWG URL standard (SUB-5).
//
// The input is split on '&' only and empty pieces are skipped. Each piece is
// cut at its first '='; a piece without '=' gives the piece as name and an
// empty value. In name and value, '+' becomes a space, then every '%'
// followed by two hexadecimal digits (either case) becomes the byte they
// encode; any other '%' is kept literally. The result is not checked for
// valid UTF-8.
//
// A name or value with neither '+' nor '%' is returned as a substring of s,
// without allocation; one that needs decoding costs one allocation.
func Parse(s string) []Pair {
	if s == "" {
		return nil
	}
	return AppendParse(make([]Pair, 0, strings.Count(s, "&")+1), s)
}

// AppendParse is Parse appending to dst (lets callers reuse a slice).
func AppendParse(dst []Pair, s string) []Pair {
	for s != "" {
		var piece string
		if i := strings.IndexByte(s, '&'); i >= 0 {
			piece, s = s[:i], s[i+1:]
		} else {
			piece, s = s, ""
		}
		if piece == "" {
			continue
		}
		name, value, _ := strings.Cut(piece, "=")
		dst = append(dst, Pair{Name: decode(name), Value: decode(value)})
	}
	return dst
}

// decode replaces '+' with a space and then percent-decodes s. Doing both in
// one pass is equivalent to doing them one after the other because neither a
// '+' nor a space is a hexadecimal digit, and a decoded byte is never
// reconsidered.
func decode(s string) string {
	i := 0
	for i < len(s) && s[i] != '+' && s[i] != '%' {
		i++
	}
	if i == len(s) {
		return s // nothing to decode: share the input's memory
	}
	// Decoding never lengthens the input, so one buffer of len(s) bytes is
	// enough; it becomes the result without a copy (the single allocation).
	buf := make([]byte, len(s))
	n := copy(buf, s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		switch c {
		case '+':
			c = ' '
		case '%':
			// A '%' not followed by two hexadecimal digits stays literal.
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				c = unhex(s[i+1])<<4 | unhex(s[i+2])
				i += 2
			}
		}
		buf[n] = c
		n++
	}
	// buf is never written again, so it can back an immutable string.
	return unsafe.String(unsafe.SliceData(buf), n)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unhex returns the value of the hexadecimal digit c, which isHex accepted.
func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
