package uritemplate

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	yt "github.com/yosida95/uritemplate/v3"
)

// Template is a URI template (RFC 6570) used as a topic selector, as the
// pre-standard drafts of Mercure defined them: a topic matches when it is
// one of the template's expansions. Matching is done by the regular
// expression that github.com/yosida95/uritemplate derives from the
// template, with Go's linear-time engine. A Template is immutable and safe
// for concurrent use.
//
// The template is matched against topics as the hub resolves them against
// its URL (the form URL patterns see), and its literal text is resolved
// the same way first: "/books/{id}" selects the topic "/books/1", and
// "https://Example.com/books/{id}" the topic "https://example.com/books/1".
// For an absolute topic already in canonical form, the resolved topic is
// the topic itself, so this is the drafts' plain string matching.
type Template struct {
	raw      string
	resolved string
	prefix   string // literal text of resolved before its first expression
	// suffix is literal text that every match ends with, read from re:
	// Match compares it before it runs re.
	suffix string
	vars   int
	re     *regexp.Regexp
}

// ErrTemplate reports a string that is not a URI template with at least
// one expression.
var ErrTemplate = errors.New("invalid URI template")

// IsTemplate reports whether s is a URI template with at least one
// expression: the drafts took such a selector as a template, and any other
// as an exact topic.
func IsTemplate(s string) bool {
	if !strings.Contains(s, "{") {
		return false
	}
	_, err := parse(s)
	return err == nil
}

// Vars counts the variables of the template s, which need not be valid:
// the cost estimate of a template before it is parsed.
func Vars(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			in = true
			n++
		case ',':
			if in {
				n++
			}
		case '}':
			in = false
		}
	}
	return n
}

// parse parses s, turning a panic of the parser into an error: templates
// come from clients.
func parse(s string) (t *yt.Template, err error) {
	defer func() {
		if recover() != nil {
			t, err = nil, ErrTemplate
		}
	}()
	t, err = yt.New(s)
	if err != nil || len(t.Varnames()) == 0 {
		return nil, ErrTemplate
	}
	return t, nil
}

// Compile compiles the template raw. resolve resolves a topic as the hub
// does (against the hub URL, returning its serialization); when the
// template's literal text does not resolve, the template is matched as
// written.
func Compile(raw string, resolve func(topic string) (string, bool)) (tpl *Template, err error) {
	if _, err := parse(raw); err != nil {
		return nil, err
	}
	resolved := resolveLiterals(raw, resolve)
	t, err := parse(resolved)
	if err != nil {
		resolved = raw
		if t, err = parse(raw); err != nil {
			return nil, err
		}
	}
	defer func() {
		if recover() != nil { // Regexp uses MustCompile
			tpl, err = nil, ErrTemplate
		}
	}()
	prefix := resolved
	if i := strings.IndexByte(resolved, '{'); i >= 0 {
		prefix = resolved[:i]
	}
	re := t.Regexp()
	return &Template{raw: raw, resolved: resolved, prefix: prefix, suffix: literalSuffix(re), vars: len(t.Varnames()), re: re}, nil
}

// literalSuffix returns the literal text that every string re matches
// ends with, as far as its syntax tree says: the literals, case-sensitive,
// that come last before the end of the text it is anchored to.
func literalSuffix(re *regexp.Regexp) string {
	tree, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil || tree.Op != syntax.OpConcat {
		return ""
	}
	subs := tree.Sub
	if len(subs) == 0 || subs[len(subs)-1].Op != syntax.OpEndText {
		return ""
	}
	subs = subs[:len(subs)-1]
	var lits []string
	for i := len(subs) - 1; i >= 0 && subs[i].Op == syntax.OpLiteral && subs[i].Flags&syntax.FoldCase == 0; i-- {
		lits = append(lits, string(subs[i].Rune))
	}
	slices.Reverse(lits)
	return strings.Join(lits, "")
}

// resolveLiterals resolves the literal text of the template raw: each
// expression is replaced by a placeholder that any part of a URL keeps as
// it is (lowercase letters and digits), the result is resolved like a
// topic, and the placeholders are replaced by their expressions again. It
// returns raw when the result does not resolve or loses a placeholder.
func resolveLiterals(raw string, resolve func(string) (string, bool)) string {
	var exprs []string
	var b strings.Builder
	mark := placeholderBase(raw)
	for rest := raw; rest != ""; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return raw
		}
		b.WriteString(rest[:i])
		b.WriteString(placeholder(mark, len(exprs)))
		exprs = append(exprs, rest[i:i+j+1])
		rest = rest[i+j+1:]
	}
	href, ok := resolve(b.String())
	if !ok {
		return raw
	}
	var out strings.Builder
	for n, e := range exprs {
		ph := placeholder(mark, n)
		i := strings.Index(href, ph)
		if i < 0 || strings.Contains(href[i+len(ph):], ph) {
			return raw
		}
		out.WriteString(href[:i])
		out.WriteString(e)
		href = href[i+len(ph):]
	}
	out.WriteString(href)
	return out.String()
}

// placeholderBase returns a string of lowercase letters that s does not
// contain, in any case.
func placeholderBase(s string) string {
	lower := strings.ToLower(s)
	mark := "mercuretpl"
	for strings.Contains(lower, mark) {
		mark += "x"
	}
	return mark
}

func placeholder(mark string, n int) string { return mark + strconv.Itoa(n) + "q" }

// Raw returns the template as written.
func (t *Template) Raw() string { return t.raw }

// Resolved returns the template with its literal text resolved, as it is
// matched.
func (t *Template) Resolved() string { return t.resolved }

// Prefix returns the literal text the resolved template starts with: every
// topic it matches starts with it.
func (t *Template) Prefix() string { return t.prefix }

// Vars returns the number of variables of the template.
func (t *Template) Vars() int { return t.vars }

// Suffix returns literal text that every topic the template matches ends
// with, "" when it does not tell.
func (t *Template) Suffix() string { return t.suffix }

// Match reports whether the resolved topic href is an expansion of the
// template.
func (t *Template) Match(href string) bool {
	return strings.HasSuffix(href, t.suffix) && t.re.MatchString(href)
}
