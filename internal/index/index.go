// Package index is the hub's subscriber index: it maps an update's topics
// to the subscriptions whose matchers select them.
//
// Costs per update topic: one map lookup for exact matchers; for URL
// patterns, one walk down a trie keyed by the patterns' literal prefixes
// (scheme, host, leading path segments) and one evaluation of each distinct
// pattern found on the way, however many subscriptions share it. An update
// on a topic nobody matches therefore costs the same with ten or ten
// thousand subscribers.
package index

import (
	"strings"

	"github.com/mercurekit/mercure/internal/topicurl"
)

// Kind is a matcher type.
type Kind uint8

// Matcher kinds. Wildcard is the "*" matcher, recognized before the type
// (MAT-4).
const (
	Exact Kind = iota
	URLPattern
	Wildcard
)

// Index holds subscriptions of values of type T. It is not safe for
// concurrent use: the hub serializes Add, Remove and Match with its own lock.
type Index[T any] struct {
	resolver *topicurl.Resolver
	exact    map[string]*list[T]
	wildcard list[T]
	patterns map[string]*patternSubs[T] // interned by raw pattern
	trie     node[T]
	npattern int
}

// Entry is one registered subscription; keep it to remove the subscription.
type Entry[T any] struct {
	list    *list[T]
	slot    int
	exact   string          // key in exact, for pruning
	pattern *patternSubs[T] // set for URL pattern subscriptions
}

type list[T any] struct {
	vals    []T
	entries []*Entry[T]
}

type patternSubs[T any] struct {
	pat  *Pattern
	subs list[T]
	slot int // position in its trie node's list
}

type node[T any] struct {
	children map[string]*node[T]
	patterns []*patternSubs[T]
}

// New returns an empty index resolving topics with r.
func New[T any](r *topicurl.Resolver) *Index[T] {
	return &Index[T]{
		resolver: r,
		exact:    make(map[string]*list[T]),
		patterns: make(map[string]*patternSubs[T]),
	}
}

// Pattern returns the compiled pattern already interned for raw, if any,
// so that subscribers sharing a pattern compile it once.
func (ix *Index[T]) Pattern(raw string) *Pattern {
	if ps := ix.patterns[raw]; ps != nil {
		return ps.pat
	}
	return nil
}

// SamePrefix returns the number of distinct patterns registered with the
// same literal prefix as p (p included if registered). Each of them is
// evaluated for every update topic that has this prefix, so the hub caps
// this number.
func (ix *Index[T]) SamePrefix(p *Pattern) int {
	n := &ix.trie
	for _, k := range p.keys {
		if n = n.children[k]; n == nil {
			return 0
		}
	}
	return len(n.patterns)
}

// Add registers v under one matcher. For URLPattern, pat is the compiled
// value (from [Compile] or [Index.Pattern]); for Exact, value is the topic.
func (ix *Index[T]) Add(kind Kind, value string, pat *Pattern, v T) *Entry[T] {
	e := &Entry[T]{}
	switch kind {
	case Wildcard:
		e.list = &ix.wildcard
	case Exact:
		l := ix.exact[value]
		if l == nil {
			l = &list[T]{}
			ix.exact[value] = l
		}
		e.list, e.exact = l, value
	case URLPattern:
		ps := ix.patterns[pat.raw]
		if ps == nil {
			ps = &patternSubs[T]{pat: pat}
			ix.patterns[pat.raw] = ps
			n := &ix.trie
			for _, k := range pat.keys {
				c := n.children[k]
				if c == nil {
					if n.children == nil {
						n.children = make(map[string]*node[T])
					}
					c = &node[T]{}
					n.children[k] = c
				}
				n = c
			}
			ps.slot = len(n.patterns)
			n.patterns = append(n.patterns, ps)
			ix.npattern++
		}
		e.list, e.pattern = &ps.subs, ps
	}
	e.slot = len(e.list.vals)
	e.list.vals = append(e.list.vals, v)
	e.list.entries = append(e.list.entries, e)
	return e
}

// Remove unregisters a subscription returned by Add. Removing twice is a no-op.
func (ix *Index[T]) Remove(e *Entry[T]) {
	l := e.list
	if l == nil {
		return
	}
	last := len(l.vals) - 1
	if e.slot != last {
		l.vals[e.slot] = l.vals[last]
		l.entries[e.slot] = l.entries[last]
		l.entries[e.slot].slot = e.slot
	}
	var zero T
	l.vals[last] = zero
	l.entries[last] = nil
	l.vals, l.entries = l.vals[:last], l.entries[:last]
	e.list = nil
	if last > 0 {
		return
	}
	// The last subscription of a topic or pattern is gone: drop its state.
	switch {
	case e.pattern != nil:
		ix.removePattern(e.pattern)
	case l != &ix.wildcard:
		delete(ix.exact, e.exact)
	}
}

func (ix *Index[T]) removePattern(ps *patternSubs[T]) {
	delete(ix.patterns, ps.pat.raw)
	ix.npattern--
	path := make([]*node[T], 0, len(ps.pat.keys)+1)
	n := &ix.trie
	path = append(path, n)
	for _, k := range ps.pat.keys {
		n = n.children[k]
		path = append(path, n)
	}
	last := len(n.patterns) - 1
	if ps.slot != last {
		n.patterns[ps.slot] = n.patterns[last]
		n.patterns[ps.slot].slot = ps.slot
	}
	n.patterns[last] = nil
	n.patterns = n.patterns[:last]
	// Prune nodes left empty, from the leaf up.
	for i := len(path) - 1; i > 0; i-- {
		c := path[i]
		if len(c.patterns) > 0 || len(c.children) > 0 {
			break
		}
		delete(path[i-1].children, ps.pat.keys[i-1])
	}
}

// Len returns the number of registered subscriptions of each kind.
func (ix *Index[T]) Len() (exact, patterns, wildcard int) {
	for _, l := range ix.exact {
		exact += len(l.vals)
	}
	for _, ps := range ix.patterns {
		patterns += len(ps.subs.vals)
	}
	return exact, patterns, len(ix.wildcard.vals)
}

// Match calls fn for every subscription whose matcher selects one of
// topics. fn may be called more than once for a value registered under
// several matchers or selected by several topics: the caller deduplicates
// (SUB-13). fn must not call Add or Remove.
func (ix *Index[T]) Match(topics []string, fn func(T)) {
	for _, v := range ix.wildcard.vals {
		fn(v)
	}
	for _, t := range topics {
		if l := ix.exact[t]; l != nil {
			for _, v := range l.vals {
				fn(v)
			}
		}
		if ix.npattern == 0 {
			continue
		}
		u, ok := ix.resolver.Resolve(t)
		if !ok {
			continue // MAT-8: an unparsable topic never matches a pattern
		}
		ix.matchPatterns(u, fn)
	}
}

func (ix *Index[T]) matchPatterns(u topicurl.URL, fn func(T)) {
	n := &ix.trie
	depth := 0
	rest, pathDone := u.Pathname, false
	for {
		for _, ps := range n.patterns {
			if ps.pat.Test(u.Href) {
				for _, v := range ps.subs.vals {
					fn(v)
				}
			}
		}
		if len(n.children) == 0 {
			return
		}
		var key string
		switch depth {
		case 0:
			key = u.Scheme
		case 1:
			key = u.Hostname
		default:
			if pathDone {
				return
			}
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				key, rest = rest[:i], rest[i+1:]
			} else {
				key, pathDone = rest, true
			}
		}
		n = n.children[key]
		if n == nil {
			return
		}
		depth++
	}
}
