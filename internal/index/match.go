package index

import (
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"weak"

	"github.com/dunglas/go-urlpattern"

	"github.com/mercurekit/mercure/internal/topicurl"
)

// A compiled go-urlpattern URLPattern keeps eight components, each with its
// own compiled regular expression: only the full wildcard and the empty
// component share theirs, so the protocol "https" and the hostname
// "example.com" of every distinct pattern cost a program each, about 2.5
// KB of heap apiece, on top of the pathname's. A urlMatcher keeps what
// evaluation needs instead: nothing for a full-wildcard component, a
// string for a literal one, and a regular expression interned by its
// source, shared by every pattern that has the same component, for the
// others.
//
// The engine's exported API gives each component's canonical pattern
// string, not its regular expression: newURLMatcher parses that string
// again, as the URL Pattern Standard's "parse a pattern string" does, and
// generates the regular expression as "generate a regular expression and
// name list" does. A canonical pattern string holds its text already
// encoded, so the encoding callback is the identity here. The result is
// checked against the engine's own Test by TestMatcherEquivalence and
// FuzzPatternEquivalence.

// URL components, in the order the engine matches them.
const (
	compProtocol = iota
	compUsername
	compPassword
	compHostname
	compPort
	compPathname
	compSearch
	compHash
)

// check is what one component of a URL must satisfy: equal pre when re
// is nil; else start with pre, end with suf and match re in between. The
// literal text that a component starts and ends with is checked apart, so
// that patterns differing only there (an app's "/users/42/*" and
// "/users/43/*") share one expression for the rest, and so that a topic
// that does not have it is rejected before any expression runs.
type check struct {
	comp     uint8
	pre, suf string
	re       *regexp.Regexp
}

// literal reports whether v passes the literal part of c: all of it when
// c has no expression.
func (c *check) literal(v string) bool {
	if c.re == nil {
		return v == c.pre
	}
	return len(v) >= len(c.pre)+len(c.suf) && strings.HasPrefix(v, c.pre) && strings.HasSuffix(v, c.suf)
}

// match reports whether v satisfies c.
func (c *check) match(v string) bool {
	return c.literal(v) && (c.re == nil || c.re.MatchString(v[len(c.pre):len(v)-len(c.suf)]))
}

// urlMatcher evaluates a compiled URL pattern: every check must pass.
// Components that are the full wildcard have no check (a parsed URL's
// components hold no newline, the one character the wildcard's ".*" does
// not match).
type urlMatcher struct {
	checks []check // literal ones first: they are cheaper
	// nlit is the number of checks without an expression, at the start
	// of checks.
	nlit int
}

// component returns the component comp of u.
func component(u *topicurl.URL, comp uint8) string {
	switch comp {
	case compProtocol:
		return u.Scheme
	case compUsername:
		return u.Username
	case compPassword:
		return u.Password
	case compHostname:
		return u.Hostname
	case compPort:
		return u.Port
	case compPathname:
		return u.Pathname
	case compSearch:
		return u.Query
	}
	return u.Fragment
}

// test reports whether the URL u, parsed already, matches, as the
// engine's Test(u.Href, "") does. The literal text of every component is
// compared before any regular expression runs: most topics that a pattern
// does not select fail there, for the cost of a few comparisons.
func (m *urlMatcher) test(u *topicurl.URL) bool {
	for i := range m.checks {
		c := &m.checks[i]
		if !c.literal(component(u, c.comp)) {
			return false
		}
	}
	for i := m.nlit; i < len(m.checks); i++ {
		c := &m.checks[i]
		v := component(u, c.comp)
		if !c.re.MatchString(v[len(c.pre) : len(v)-len(c.suf)]) {
			return false
		}
	}
	return true
}

// pathTail returns the last segment that every pathname the pattern
// matches ends with, if its literal text says: the text after the last
// "/" of the literal pathname, or of the literal text it ends with.
func (m *urlMatcher) pathTail() (string, bool) {
	for i := range m.checks {
		c := &m.checks[i]
		if c.comp != compPathname {
			continue
		}
		lit := c.suf
		if c.re == nil {
			lit = c.pre
		}
		if j := strings.LastIndexByte(lit, '/'); j >= 0 {
			return lit[j+1:], true
		}
	}
	return "", false
}

// specialSchemes are the URL Standard's special schemes but file, as the
// engine lists them: a pathname is matched segment-wise when the protocol
// component matches one of them.
var specialSchemes = []string{"ftp", "http", "https", "ws", "wss"}

// componentOptions are the engine's options for compiling one component:
// the delimiter a segment wildcard stops at and the code point a group
// takes as its prefix (0 for none).
type componentOptions struct{ delimiter, prefix byte }

// newURLMatcher builds the matcher of p from its components' pattern
// strings. It returns false on a pattern string it cannot read back, for
// the caller to keep evaluating p itself.
func newURLMatcher(p *urlpattern.URLPattern) (*urlMatcher, bool) {
	sources := [...]string{
		p.Protocol(), p.Username(), p.Password(), p.Hostname(),
		p.Port(), p.Pathname(), p.Search(), p.Hash(),
	}
	var m urlMatcher
	special := true // the full wildcard matches every special scheme
	for comp, src := range sources {
		if src == "*" {
			continue
		}
		opts := componentOptions{}
		switch comp {
		case compHostname:
			opts = componentOptions{delimiter: '.'}
		case compPathname:
			if special {
				opts = componentOptions{delimiter: '/', prefix: '/'}
			}
		}
		parts, ok := parsePatternString(src, opts)
		if !ok {
			return nil, false
		}
		c := check{comp: uint8(comp)}
		// The regular expression of parts is anchored at both ends: the
		// fixed text it starts and ends with can be compared apart, unless
		// a group's own expression looks at what surrounds it (`(\A)`,
		// `(^x)`, `(\b)` match at the start of the text between, never
		// after the fixed text before it).
		i, j := 0, len(parts)
		if !hasAssertion(parts) {
			for i < j && parts[i].kind == partFixed && parts[i].modifier == modNone {
				i++
			}
			for j > i && parts[j-1].kind == partFixed && parts[j-1].modifier == modNone {
				j--
			}
		}
		c.pre, c.suf = concat(parts[:i]), concat(parts[j:])
		if i < j {
			re, err := internRegexp(regexpSource(parts[i:j], opts))
			if err != nil {
				return nil, false
			}
			c.re = re
		}
		if comp == compProtocol {
			special = false
			for _, s := range specialSchemes {
				if c.match(s) {
					special = true
					break
				}
			}
		}
		m.checks = append(m.checks, c)
	}
	// Literal checks first; the order of checks does not change the result.
	lits := m.checks[:0:0]
	var res []check
	for _, c := range m.checks {
		if c.re == nil {
			lits = append(lits, c)
		} else {
			res = append(res, c)
		}
	}
	m.checks, m.nlit = append(lits, res...), len(lits)
	return &m, true
}

// hasAssertion reports whether a regexp group of parts holds an
// empty-width assertion (text or line boundary, word boundary): what it
// matches depends on the text around the group, so that the group cannot
// be matched apart from the fixed text beside it.
func hasAssertion(parts []part) bool {
	for _, p := range parts {
		if p.kind != partRegexp {
			continue
		}
		re, err := syntax.Parse(p.value, syntax.Perl)
		if err != nil {
			return true // compiling the whole fails the same way
		}
		if asserts(re) {
			return true
		}
	}
	return false
}

func asserts(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	return slices.ContainsFunc(re.Sub, asserts)
}

// Kinds of part of a parsed pattern string.
const (
	partFixed = iota
	partRegexp
	partSegment // :name, matching up to the next delimiter
	partFull    // *, matching anything
)

// Part modifiers.
const (
	modNone     = 0
	modOptional = '?'
	modStar     = '*'
	modPlus     = '+'
)

// part is one piece of a pattern string: fixed text or a group with its
// prefix, suffix and modifier (the group's name does not matter to
// matching).
type part struct {
	kind           uint8
	modifier       byte
	value          string // fixed text, or a group's regular expression
	prefix, suffix string
}

// Token types of a pattern string.
const (
	tokOpen = iota
	tokClose
	tokRegexp
	tokName
	tokChar
	tokEscaped
	tokModifier // ? or +
	tokAsterisk
	tokEnd
)

type token struct {
	typ   uint8
	value string
}

// tokenize splits a canonical pattern string into tokens, strictly: it
// returns false where the engine's strict tokenizer would fail.
func tokenize(s string) ([]token, bool) {
	toks := make([]token, 0, len(s)+1) // at most a token a byte, and the end
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '*':
			toks = append(toks, token{tokAsterisk, "*"})
		case '+', '?':
			toks = append(toks, token{tokModifier, s[i : i+1]})
		case '{':
			toks = append(toks, token{tokOpen, "{"})
		case '}':
			toks = append(toks, token{tokClose, "}"})
		case '\\':
			if i+1 >= len(s) {
				return nil, false
			}
			_, m := utf8.DecodeRuneInString(s[i+1:])
			toks = append(toks, token{tokEscaped, s[i+1 : i+1+m]})
			n += m
		case ':':
			j := i + 1
			for j < len(s) {
				c, m := utf8.DecodeRuneInString(s[j:])
				if !nameCodePoint(c, j == i+1) {
					break
				}
				j += m
			}
			if j == i+1 {
				return nil, false
			}
			toks = append(toks, token{tokName, s[i+1 : j]})
			n = j - i
		case '(':
			end, ok := regexpTokenEnd(s, i+1)
			if !ok {
				return nil, false
			}
			toks = append(toks, token{tokRegexp, s[i+1 : end]})
			n = end + 1 - i
		default:
			toks = append(toks, token{tokChar, s[i : i+n]})
		}
		i += n
	}
	return append(toks, token{typ: tokEnd}), true
}

// regexpTokenEnd returns the index of the ')' closing the regexp token
// whose content starts at start, with the engine's rules: ASCII only, not
// starting with '?', nested groups non-capturing, not empty.
func regexpTokenEnd(s string, start int) (int, bool) {
	depth := 1
	for i := start; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || i == start && c == '?' {
			return 0, false
		}
		switch c {
		case '\\':
			if i+1 >= len(s) || s[i+1] >= utf8.RuneSelf {
				return 0, false
			}
			i++
		case ')':
			if depth--; depth == 0 {
				return i, i > start
			}
		case '(':
			depth++
			if i+1 >= len(s) || s[i+1] != '?' {
				return 0, false
			}
		}
	}
	return 0, false
}

// nameCodePoint reports whether r may be part of a :name, first or not.
func nameCodePoint(r rune, first bool) bool {
	if unicode.In(r, unicode.Pattern_Syntax, unicode.Pattern_White_Space) {
		return false
	}
	if first {
		return unicode.In(r, unicode.L, unicode.Nl, unicode.Other_ID_Start)
	}
	return unicode.In(r, unicode.L, unicode.Nl, unicode.Other_ID_Start,
		unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc, unicode.Other_ID_Continue)
}

// patternParser holds the state of parsePatternString.
type patternParser struct {
	toks    []token
	i       int
	pending strings.Builder
	parts   []part
	opts    componentOptions
}

func (p *patternParser) try(typ uint8) *token {
	if p.i < len(p.toks) && p.toks[p.i].typ == typ {
		p.i++
		return &p.toks[p.i-1]
	}
	return nil
}

func (p *patternParser) tryRegexpOrWildcard(name *token) *token {
	t := p.try(tokRegexp)
	if t == nil && name == nil {
		t = p.try(tokAsterisk)
	}
	return t
}

func (p *patternParser) tryModifier() *token {
	if t := p.try(tokModifier); t != nil {
		return t
	}
	return p.try(tokAsterisk)
}

func (p *patternParser) text() string {
	var b strings.Builder
	for {
		t := p.try(tokChar)
		if t == nil {
			t = p.try(tokEscaped)
		}
		if t == nil {
			return b.String()
		}
		b.WriteString(t.value)
	}
}

func (p *patternParser) flush() {
	if p.pending.Len() > 0 {
		p.parts = append(p.parts, part{kind: partFixed, value: p.pending.String()})
		p.pending.Reset()
	}
}

func (p *patternParser) add(prefix string, name, re *token, suffix string, mod *token) {
	var modifier byte
	if mod != nil {
		modifier = mod.value[0]
	}
	if name == nil && re == nil && modifier == modNone {
		p.pending.WriteString(prefix)
		return
	}
	p.flush()
	if name == nil && re == nil {
		if prefix != "" {
			p.parts = append(p.parts, part{kind: partFixed, value: prefix, modifier: modifier})
		}
		return
	}
	pt := part{kind: partRegexp, modifier: modifier, prefix: prefix, suffix: suffix}
	switch {
	case re == nil:
		pt.kind = partSegment
	case re.typ == tokAsterisk:
		pt.kind = partFull
	default:
		pt.value = re.value
	}
	switch pt.value {
	case segmentWildcard(p.opts):
		pt.kind, pt.value = partSegment, ""
	case ".*":
		pt.kind, pt.value = partFull, ""
	}
	p.parts = append(p.parts, pt)
}

// parsePatternString parses a component's canonical pattern string into
// parts, as the URL Pattern Standard's "parse a pattern string" does with
// an identity encoding callback. It returns false on what the engine
// would refuse.
func parsePatternString(s string, opts componentOptions) ([]part, bool) {
	toks, ok := tokenize(s)
	if !ok {
		return nil, false
	}
	p := patternParser{toks: toks, opts: opts}
	for p.i < len(p.toks) {
		char := p.try(tokChar)
		name := p.try(tokName)
		re := p.tryRegexpOrWildcard(name)
		if name != nil || re != nil {
			prefix := ""
			if char != nil {
				prefix = char.value
			}
			if prefix != "" && prefix != string(rune(opts.prefix)) {
				p.pending.WriteString(prefix)
				prefix = ""
			}
			p.flush()
			p.add(prefix, name, re, "", p.tryModifier())
			continue
		}
		fixed := char
		if fixed == nil {
			fixed = p.try(tokEscaped)
		}
		if fixed != nil {
			p.pending.WriteString(fixed.value)
			continue
		}
		if p.try(tokOpen) != nil {
			prefix := p.text()
			name := p.try(tokName)
			re := p.tryRegexpOrWildcard(name)
			suffix := p.text()
			if p.try(tokClose) == nil {
				return nil, false
			}
			mod := p.tryModifier()
			if name == nil && re == nil && mod != nil && suffix != "" {
				return nil, false
			}
			p.add(prefix, name, re, suffix, mod)
			continue
		}
		p.flush()
		if p.try(tokEnd) == nil {
			return nil, false
		}
	}
	return p.parts, true
}

// concat returns the text of fixed parts.
func concat(parts []part) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.value)
	}
	return b.String()
}

// segmentWildcard is the regular expression of a :name group: anything up
// to the next delimiter.
func segmentWildcard(opts componentOptions) string {
	return "[^" + escapeRegexp(string(rune(opts.delimiter))) + "]+?"
}

// regexpSource generates the regular expression that parts match, as the
// URL Pattern Standard's "generate a regular expression and name list"
// does (case-sensitive, MAT-7).
func regexpSource(parts []part, opts componentOptions) string {
	var b strings.Builder
	b.WriteString(`\A(?:`)
	for _, p := range parts {
		if p.kind == partFixed {
			if p.modifier == modNone {
				b.WriteString(escapeRegexp(p.value))
			} else {
				b.WriteString("(?:" + escapeRegexp(p.value) + ")")
				b.WriteByte(p.modifier)
			}
			continue
		}
		var value string
		switch p.kind {
		case partSegment:
			value = segmentWildcard(opts)
		case partFull:
			value = ".*"
		default:
			value = p.value
		}
		pre, suf := escapeRegexp(p.prefix), escapeRegexp(p.suffix)
		switch {
		case pre == "" && suf == "" && (p.modifier == modNone || p.modifier == modOptional):
			b.WriteString("(" + value + ")")
			if p.modifier != modNone {
				b.WriteByte(p.modifier)
			}
		case pre == "" && suf == "":
			b.WriteString("((?:" + value + ")")
			b.WriteByte(p.modifier)
			b.WriteByte(')')
		case p.modifier == modNone || p.modifier == modOptional:
			b.WriteString("(?:" + pre + "(" + value + ")" + suf + ")")
			if p.modifier != modNone {
				b.WriteByte(p.modifier)
			}
		default:
			b.WriteString("(?:" + pre + "((?:" + value + ")(?:" + suf + pre + "(?:" + value + "))*)" + suf + ")")
			if p.modifier == modStar {
				b.WriteByte('?')
			}
		}
	}
	b.WriteString(`)\z`)
	return b.String()
}

// regexps interns compiled component expressions by source, weakly: an
// expression stays shared while some pattern uses it. A *regexp.Regexp is
// safe for concurrent use.
var regexps = struct {
	sync.Mutex
	m map[string]weak.Pointer[regexp.Regexp]
}{m: make(map[string]weak.Pointer[regexp.Regexp])}

// internRegexp returns the compiled expression src, shared with every
// other user of the same source.
func internRegexp(src string) (*regexp.Regexp, error) {
	regexps.Lock()
	if re := regexps.m[src].Value(); re != nil {
		regexps.Unlock()
		return re, nil
	}
	regexps.Unlock()
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, err
	}
	regexps.Lock()
	defer regexps.Unlock()
	if old := regexps.m[src].Value(); old != nil {
		return old, nil // compiled meanwhile
	}
	regexps.m[re.String()] = weak.Make(re)
	runtime.AddCleanup(re, forgetRegexp, re.String())
	return re, nil
}

// forgetRegexp drops the entry of a collected expression, unless src was
// compiled again since.
func forgetRegexp(src string) {
	regexps.Lock()
	defer regexps.Unlock()
	if wp, ok := regexps.m[src]; ok && wp.Value() == nil {
		delete(regexps.m, src)
	}
}

// internedRegexps returns the number of interned expressions, for tests.
func internedRegexps() int {
	regexps.Lock()
	defer regexps.Unlock()
	return len(regexps.m)
}

// escapeRegexp escapes the regular expression metacharacters of s, and
// '/', as the engine does.
func escapeRegexp(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`\.+*?()|[]{}^$/`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
