// Package uritemplate implements the one RFC 6570 expansion the hub needs:
// simple string expansion ({var}), used to build the topics and web API
// paths of active subscriptions (ACT-5).
//
// Go's url.PathEscape leaves ": @ & = + $" alone and url.QueryEscape turns
// a space into "+", so neither fits.
package uritemplate

// Escape expands s as a simple-string variable: the unreserved characters
// A-Z a-z 0-9 - . _ ~ stay, every other byte of its UTF-8 encoding becomes
// %XX with uppercase hex. The input is not decoded first, so a "%" in it is
// encoded too ("%20" becomes "%2520").
func Escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
