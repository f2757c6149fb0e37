package client

import (
	"encoding/json"
	"strings"
)

// Challenge is one authentication challenge of a WWW-Authenticate header
// (RFC 9110 section 11.6.1), such as the Bearer challenges of RFC 6750
// section 3 that a hub sends with 401 and 403.
type Challenge struct {
	// Scheme is the authentication scheme, e.g. "Bearer".
	Scheme string
	// Params holds the auth-params, names lowercased.
	Params map[string]string
	// Error is the OAuth error code: "invalid_token", "insufficient_scope",
	// "invalid_request", or empty when no token was sent.
	Error string
	// ResourceMetadata is the URL of the hub's protected resource metadata
	// (RFC 9728 section 5.1), where the client learns which authorization
	// server issues tokens for the hub.
	ResourceMetadata string
}

// ParseChallenges parses the values of WWW-Authenticate headers. Malformed
// parts are skipped: a challenge is informative, never a reason to fail.
func ParseChallenges(values []string) []Challenge {
	var out []Challenge
	for _, v := range values {
		p := &lexer{s: v}
		var cur *Challenge
		for {
			p.skipSpaceAndCommas()
			if p.done() {
				break
			}
			tok := p.token()
			if tok == "" {
				p.skipTo(',')
				continue
			}
			p.skipSpace()
			if p.peek() == '=' {
				// token68 or auth-param: a param if a value follows
				// the '=' directly, else trailing '=' of a token68.
				p.i++
				p.skipSpace()
				if cur == nil {
					p.skipTo(',')
					continue
				}
				var val string
				if p.peek() == '"' {
					val, _ = p.quoted()
				} else {
					val = p.token()
				}
				cur.Params[strings.ToLower(tok)] = val
				continue
			}
			// A new challenge: the scheme, maybe followed by params.
			out = append(out, Challenge{Scheme: tok, Params: map[string]string{}})
			cur = &out[len(out)-1]
		}
	}
	for i := range out {
		out[i].Error = out[i].Params["error"]
		out[i].ResourceMetadata = out[i].Params["resource_metadata"]
	}
	return out
}

// problemDetail extracts the detail, or else the title, of an RFC 9457
// problem document.
func problemDetail(body []byte) string {
	var p struct{ Title, Detail string }
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	if p.Detail != "" {
		return p.Detail
	}
	return p.Title
}

// lexer reads the tokens, quoted strings and separators of HTTP header
// values (RFC 9110 section 5.6).
type lexer struct {
	s string
	i int
}

func (p *lexer) done() bool { return p.i >= len(p.s) }

func (p *lexer) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *lexer) skipSpace() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *lexer) skipSpaceAndCommas() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
}

// skipTo moves to the next c outside quoted strings (or the end).
func (p *lexer) skipTo(c byte) {
	for !p.done() && p.s[p.i] != c {
		if p.s[p.i] == '"' {
			p.quoted()
			continue
		}
		p.i++
	}
}

// token reads an RFC 9110 token (tchar*); token68 characters '/' and '~'
// are accepted too, so that opaque values are read whole.
func (p *lexer) token() string {
	start := p.i
	for !p.done() && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~/", c) >= 0
}

// quoted reads a quoted string at p.i, undoing backslash escapes; ok is
// false when it is not closed.
func (p *lexer) quoted() (string, bool) {
	p.i++ // the opening quote
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch c {
		case '"':
			return b.String(), true
		case '\\':
			if !p.done() {
				b.WriteByte(p.s[p.i])
				p.i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), false
}
