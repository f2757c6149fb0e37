package index

import (
	"fmt"
	"strings"

	"github.com/mercurekit/mercure/internal/topicurl"
	"github.com/mercurekit/mercure/internal/uritemplate"
)

// Estimated program cost of a URI template's pieces: each variable
// becomes a class of the characters its operator allows, repeated, with
// its separators.
const templateVarSize = 32

// EstimateTemplateCost estimates what the URI template raw costs, as
// [EstimateCost] does for URL patterns: its variables count as groups,
// and its size is that of its literal text and of a class per variable.
// It costs time linear in len(raw) and allocates nothing.
func EstimateTemplateCost(raw string) Cost {
	vars := uritemplate.Vars(raw)
	return Cost{Groups: vars, Size: saturatingAdd(baseSize+literalSize*len(raw), templateVarSize*vars)}
}

// templateKey is what a URI template is interned under: raw, which never
// holds a NUL (TOP-1), behind one, so that no URL pattern has the same.
func templateKey(raw string) string { return "\x00" + raw }

// CompileTemplate compiles the URI template raw (see [uritemplate.Template])
// into a pattern that the index evaluates as it does URL patterns: against
// topics resolved by r.
func CompileTemplate(raw string, r *topicurl.Resolver) (*Pattern, error) {
	return compileTemplate(raw, EstimateTemplateCost(raw), r)
}

func compileTemplate(raw string, cost Cost, r *topicurl.Resolver) (*Pattern, error) {
	tpl, err := uritemplate.Compile(raw, func(s string) (string, bool) {
		u, ok := r.Resolve(s)
		return u.Href, ok
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %q", uritemplate.ErrTemplate, raw)
	}
	p := &Pattern{raw: raw, key: templateKey(raw), cost: cost, tpl: tpl, resolver: r, keys: templateKeys(tpl.Prefix())}
	// A topic the template matches ends with its literal suffix, so its
	// URL's last segment is the suffix's, if the suffix has a "/".
	if i := strings.LastIndexByte(tpl.Suffix(), '/'); i >= 0 {
		p.tail, p.hasTail = tailKey{href: true, seg: tpl.Suffix()[i+1:]}, true
	}
	return p, nil
}

// templateKeys returns the trie keys of a template from the literal text
// its resolved form starts with, which every topic it matches starts with
// once resolved: the scheme, then the hostname and the complete path
// segments, as far as they are plain literals that the URL parser
// serializes as written.
func templateKeys(prefix string) []string {
	scheme, rest, ok := strings.Cut(prefix, ":")
	if !ok || scheme == "" || !isLiteral(scheme, schemeByte) {
		return nil
	}
	keys := []string{strings.ToLower(scheme)}
	rest, ok = strings.CutPrefix(rest, "//")
	if !ok {
		return keys
	}
	host, path, ok := strings.Cut(rest, "/")
	if !ok {
		return keys // the host may go on in an expression
	}
	host, _, _ = strings.Cut(host, ":") // the port: the template checks it
	if host == "" || !isLiteral(host, hostByte) {
		return keys
	}
	keys = append(keys, host, "")
	segs := strings.Split(path, "/")
	for _, seg := range segs[:len(segs)-1] { // the last one may go on
		if seg == "." || seg == ".." || !isLiteral(seg, segmentByte) {
			break
		}
		keys = append(keys, seg)
	}
	return keys
}
