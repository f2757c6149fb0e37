package mercure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/mercurekit/mercure/internal/chars"
	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// Matcher type names, as written after "match_" in subscribe requests and
// in the match_type of tokens and subscription documents (spec
// §Subscription, §Matcher Types).
const (
	// MatchExact compares topics byte for byte (spec §Matcher Types: Exact
	// Matching).
	MatchExact = "exact"
	// MatchURLPattern evaluates WHATWG URL patterns (spec §Matcher Types:
	// URL Pattern).
	MatchURLPattern = "urlpattern"
)

// matcher is one topic matcher of a subscription or a token grant.
type matcher struct {
	kind    index.Kind // Wildcard for "*", whatever the type said (MAT-4)
	typ     string     // MatchExact, MatchURLPattern or MatchURITemplate, as requested (ACT-4)
	value   string
	pattern *index.Pattern // compiled, for index.URLPattern and index.URITemplate
}

// same reports whether o is the same matcher as m.
func (m matcher) same(o matcher) bool { return m.kind == o.kind && m.value == o.value }

// matches reports whether the matcher selects topic.
func (m *matcher) matches(topic string) bool {
	switch m.kind {
	case index.Wildcard:
		return true
	case index.Exact:
		return m.value == topic // MAT-5: bytes, no resolution, no normalization
	default:
		return m.pattern.MatchTopic(topic)
	}
}

// matchesEvent reports whether the matcher selects one of e's topics,
// resolving them against the hub URL at most once per event.
func (m *matcher) matchesEvent(e *engine.Event, r *topicurl.Resolver) bool {
	switch m.kind {
	case index.Wildcard:
		return true
	case index.Exact:
		return slices.Contains(e.Topics, m.value)
	}
	urls := e.URLs(r)
	for i := range urls {
		if urls[i].Href != "" && m.pattern.TestURL(&urls[i]) { // MAT-8: unparsable topics never match
			return true
		}
	}
	return false
}

// errMatcher wraps every reason a matcher is refused (400, SUB-7, SUB-8).
var errMatcher = errors.New("invalid matcher")

// matcherType maps a subscribe parameter name to a matcher type. ok is
// false for names that are not matchers; err is set for names in the
// reserved "match" prefix that name no supported type (SUB-7).
func matcherType(name string) (typ string, ok bool, err error) {
	switch name {
	case "match", "match_exact":
		return MatchExact, true, nil
	case "match_urlpattern":
		return MatchURLPattern, true, nil
	}
	if len(name) >= 5 && strings.EqualFold(name[:5], "match") {
		return "", false, fmt.Errorf("%w: unsupported parameter %q", errMatcher, name)
	}
	return "", false, nil
}

// newMatcher validates one matcher value (SUB-8, MAT-4). A URL pattern's
// estimated cost is checked against lim and returned, but the pattern is
// not compiled yet: see [Hub.compileMatchers].
func (h *Hub) newMatcher(typ, value string, lim *PatternLimits) (matcher, index.Cost, error) {
	switch {
	case value == "":
		return matcher{}, index.Cost{}, fmt.Errorf("%w: empty value", errMatcher) // SUB-9
	case len(value) > h.cfg.limits.MaxMatcherBytes:
		return matcher{}, index.Cost{}, fmt.Errorf("%w: longer than %d bytes", errMatcher, h.cfg.limits.MaxMatcherBytes)
	case !chars.Valid(value):
		return matcher{}, index.Cost{}, fmt.Errorf("%w: %q holds invalid UTF-8, control or format characters", errMatcher, value)
	case value == "*":
		return matcher{kind: index.Wildcard, typ: typ, value: value}, index.Cost{}, nil
	case typ == MatchExact:
		return matcher{kind: index.Exact, typ: typ, value: value}, index.Cost{}, nil
	}
	cost, err := index.EstimateCost(value)
	if err == nil {
		err = lim.limit().Check(value, cost)
	}
	if err != nil {
		return matcher{}, index.Cost{}, fmt.Errorf("%w: %w", errMatcher, err)
	}
	if typ == MatchURLPattern && looksLikeTemplate(value) {
		// Valid, and almost surely not what was meant: say so, at Warn
		// the first time (a client's mistake cannot flood the log).
		level := slog.LevelDebug
		if !h.ops.templateOnce.Load() && h.ops.templateOnce.CompareAndSwap(false, true) {
			level = slog.LevelWarn
		}
		h.log.Log(context.Background(), level, "mercure: a match_urlpattern looks like a URI template: in a URL pattern, {name} is a group of the literal text name, which matches that text only; a named group is written :name (spec §Matcher Types: URL Pattern); the next ones are logged at Debug",
			"pattern", value)
	}
	return matcher{kind: index.URLPattern, typ: typ, value: value}, cost, nil
}

// looksLikeTemplate reports whether the URL pattern p holds what a URI
// template writes (RFC 6570: {name}, {/name}, {?name}...): a group of an
// identifier alone, without a modifier after it. A URL pattern reads it
// as a group of literal text, valid and useless, where the writer meant
// a variable (:name). A group with a modifier ({/*}?) is a pattern's.
func looksLikeTemplate(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '{' || (i > 0 && p[i-1] == '\\') {
			continue
		}
		j := i + 1
		if j < len(p) && strings.IndexByte("+#./;?&", p[j]) >= 0 {
			j++ // a template operator
		}
		start := j
		for j < len(p) && (p[j] == '_' || p[j] >= 'a' && p[j] <= 'z' || p[j] >= 'A' && p[j] <= 'Z' || p[j] >= '0' && p[j] <= '9') {
			j++
		}
		if j > start && j < len(p) && p[j] == '}' && (j+1 == len(p) || strings.IndexByte("?*+", p[j+1]) < 0) {
			return true
		}
	}
	return false
}

// compileMatchers compiles the URL patterns and URI templates of matchers
// checked by newMatcher or legacySelector.
func (h *Hub) compileMatchers(ms []matcher, lim *PatternLimits) error {
	for i := range ms {
		m := &ms[i]
		if !m.kind.Evaluated() || m.pattern != nil {
			continue
		}
		compile := h.compilePattern
		if m.kind == index.URITemplate {
			compile = h.compileTemplate
		}
		p, err := compile(m.value, lim)
		if err != nil {
			return fmt.Errorf("%w: %w", errMatcher, err)
		}
		m.pattern = p
	}
	return nil
}

// compilePattern returns the compiled pattern raw, provided its estimated
// cost is within lim (MAT-9): nothing is compiled for a pattern over a
// limit. Patterns come from a cache shared by subscriptions and token
// grants, so each distinct pattern is compiled once, and its cost
// estimated once, however many streams and requests use it.
func (h *Hub) compilePattern(raw string, lim *PatternLimits) (*index.Pattern, error) {
	return h.auth.patterns.Get(raw, lim.limit())
}
