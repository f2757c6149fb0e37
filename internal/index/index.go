// Package index is the hub's subscriber index: it maps an update's topics
// to the subscriptions whose matchers select them.
//
// Costs per update topic: one map lookup for exact matchers; for URL
// patterns, one walk down a trie keyed by the patterns' literal prefixes
// (scheme, host, leading path segments), a map lookup at each node of the
// way for the patterns whose literal text fixes the topic's last path
// segment, and one evaluation of each distinct pattern found, however
// many subscriptions share it. An update on a topic nobody matches
// therefore costs the same with ten or ten thousand subscribers. The
// topic is resolved once, by the caller: a pattern tests its components
// without parsing it again.
package index

import (
	"strings"
	"sync/atomic"

	"github.com/mercurekit/mercure/internal/topicurl"
)

// Kind is a matcher type.
type Kind uint8

// Matcher kinds. Wildcard is the "*" matcher, recognized before the type
// (MAT-4). URITemplate is the pre-standard drafts' template selector (see
// [CompileTemplate]); the index treats it as it treats URL patterns.
const (
	Exact Kind = iota
	URLPattern
	Wildcard
	URITemplate
)

// Evaluated reports whether matchers of kind k are compiled patterns,
// evaluated per topic, rather than compared.
func (k Kind) Evaluated() bool { return k == URLPattern || k == URITemplate }

// Index holds subscriptions of values of type T. It is not safe for
// concurrent use: the caller serializes Add, Remove and the look-ups
// with its own lock. What a look-up returns, though, may be read without
// that lock until [Index.EndRead] (see [Index.BeginRead]).
type Index[T any] struct {
	resolver *topicurl.Resolver
	exact    map[string]*list[T]
	wildcard list[T]
	patterns map[string]*Group[T] // interned by key (see Pattern.Key)
	trie     node[T]
	npattern int
	size     int // estimated size of the distinct patterns
	// reads counts the reads begun; done is the last one ended. A list
	// handed to a read that has not ended is copied before it changes.
	reads uint64
	done  atomic.Uint64
}

// Entry is one registered subscription; keep it to remove the subscription.
type Entry[T any] struct {
	list    *list[T]
	slot    int
	exact   string    // key in exact, for pruning
	pattern *Group[T] // set for URL pattern subscriptions
}

// list is the subscriptions of one topic, one pattern or "*". vals may
// be shared with a read in progress (see [Index.BeginRead]): while it
// is, its first len(vals) elements are never written; appending past
// them is safe.
type list[T any] struct {
	vals    []T
	entries []*Entry[T]
	readBy  uint64 // the last read that was handed vals
}

// take returns l's values for read r.
func (l *list[T]) take(r uint64) []T {
	l.readBy = r
	return l.vals
}

// Group is one distinct URL pattern and the subscriptions that share it.
type Group[T any] struct {
	pat  *Pattern
	subs list[T]
	slot int // position in its trie node's patterns, or in its tail's
	tail *tail[T]
}

// Pattern returns the group's compiled pattern.
func (g *Group[T]) Pattern() *Pattern { return g.pat }

// Candidate is a group found by [Index.Candidates] and its subscriptions
// when it was found.
type Candidate[T any] struct {
	Group *Group[T]
	Subs  []T
}

type node[T any] struct {
	children map[string]*node[T]
	// patterns are evaluated for every topic through this node; those of
	// a tail only for the topics that end with its key (see [tailKey]).
	patterns []*Group[T]
	tails    map[tailKey]*tail[T]
	// count is the number of patterns here, tails included.
	count int
	// work is the estimated size of the patterns that one topic through
	// this node is evaluated against here: those of patterns and those of
	// the largest tail of each kind, whose sizes tailPeak tracks.
	work     int
	tailPeak [2]peak
	// down is the most patterns on any path from this node to a leaf,
	// its own included: at the root, the most patterns registered along
	// the prefixes of one topic. downWork is the most work on any path:
	// at the root, the most that evaluating one topic can cost. kidDown
	// and kidWork track the children's.
	down, downWork   int
	kidDown, kidWork peak
}

// peak is the largest of the values of a node's children (or tails), and
// how many of them have it, so that a change of one costs O(1): they are
// scanned again only when the last one at the peak goes below it. Where
// many tie (the patterns of many users under one prefix, each its own
// child), adding and removing them never scans their siblings: a scan
// per removal made closing n such subscriptions cost O(n²).
type peak struct{ top, n int }

// move records that one value went from old to new, -1 meaning none (one
// added, or removed), and reports whether the values must be scanned
// again (see rescan): the last one at the peak went below it.
func (p *peak) move(old, new int) (rescan bool) {
	switch {
	case new > p.top:
		p.top, p.n = new, 1
	case new == p.top:
		if old != p.top {
			p.n++
		}
	case old == p.top:
		p.n--
		return p.n == 0
	}
	return false
}

// rescanKids sets n's children's peaks from a scan of them.
func (n *node[T]) rescanKids() {
	n.kidDown, n.kidWork = peak{}, peak{}
	for _, c := range n.children {
		n.kidDown.move(-1, c.down)
		n.kidWork.move(-1, c.downWork)
	}
}

// refresh sets n.down and n.downWork from n's own and its children's.
func (n *node[T]) refresh() {
	n.down, n.downWork = n.count+n.kidDown.top, n.work+n.kidWork.top
}

// moved records that the child of n whose maxima were down and work
// now has c's (c is nil once the child is removed).
func (n *node[T]) moved(down, work int, c *node[T]) {
	newDown, newWork := -1, -1
	if c != nil {
		newDown, newWork = c.down, c.downWork
	}
	a := n.kidDown.move(down, newDown)
	b := n.kidWork.move(work, newWork)
	if a || b {
		n.rescanKids()
	}
	n.refresh()
}

// tail is the patterns of a node that share a tail key.
type tail[T any] struct {
	groups []*Group[T]
	size   int // estimated size of their patterns
}

// kind is the index in tailPeak of the tails of key k.
func (k tailKey) kind() int {
	if k.href {
		return 1
	}
	return 0
}

// add places g at n, and returns how much n.work grew.
func (n *node[T]) add(g *Group[T]) int {
	size := g.pat.cost.Size
	n.count++
	if !g.pat.hasTail {
		g.slot = len(n.patterns)
		n.patterns = append(n.patterns, g)
		n.work += size
		return size
	}
	t := n.tails[g.pat.tail]
	old := -1
	if t == nil {
		if n.tails == nil {
			n.tails = make(map[tailKey]*tail[T])
		}
		t = &tail[T]{}
		n.tails[g.pat.tail] = t
	} else {
		old = t.size
	}
	g.slot, g.tail = len(t.groups), t
	t.groups = append(t.groups, g)
	t.size += size
	tp := &n.tailPeak[g.pat.tail.kind()]
	before := tp.top
	tp.move(old, t.size) // grows: never a scan
	n.work += tp.top - before
	return tp.top - before
}

// remove takes g from n.
func (n *node[T]) remove(g *Group[T]) {
	size := g.pat.cost.Size
	n.count--
	if g.tail == nil {
		removeAt(&n.patterns, g.slot)
		n.work -= size
		return
	}
	t := g.tail
	removeAt(&t.groups, g.slot)
	g.tail = nil
	k := g.pat.tail.kind()
	old := t.size
	t.size -= size
	now := t.size
	if len(t.groups) == 0 {
		now = -1
		delete(n.tails, g.pat.tail)
		if len(n.tails) == 0 {
			n.tails = nil
		}
	}
	tp := &n.tailPeak[k]
	before := tp.top
	if tp.move(old, now) {
		*tp = peak{}
		for key, t := range n.tails {
			if key.kind() == k {
				tp.move(-1, t.size)
			}
		}
	}
	n.work += tp.top - before
}

// removeAt removes the group at slot from *gs, moving the last one there.
func removeAt[T any](gs *[]*Group[T], slot int) {
	s := *gs
	last := len(s) - 1
	if slot != last {
		s[slot] = s[last]
		s[slot].slot = slot
	}
	s[last] = nil
	*gs = s[:last]
}

// New returns an empty index resolving topics with r.
func New[T any](r *topicurl.Resolver) *Index[T] {
	return &Index[T]{
		resolver: r,
		exact:    make(map[string]*list[T]),
		patterns: make(map[string]*Group[T]),
	}
}

// Pattern returns the compiled URL pattern already interned for raw, if
// any, so that subscribers sharing a pattern compile it once.
func (ix *Index[T]) Pattern(raw string) *Pattern {
	if ps := ix.patterns[raw]; ps != nil {
		return ps.pat
	}
	return nil
}

// Has reports whether a pattern with the same key as p (see
// [Pattern.Key]) is registered.
func (ix *Index[T]) Has(p *Pattern) bool { return ix.patterns[p.key] != nil }

// Shared returns the pattern interned with the same key as p (see
// [Pattern.Key]), or p when none is.
func (ix *Index[T]) Shared(p *Pattern) *Pattern {
	if ps := ix.patterns[p.key]; ps != nil {
		return ps.pat
	}
	return p
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
	return n.count
}

// WorkThrough returns the estimated size (see [Cost]) of the distinct
// patterns that one topic may be evaluated against, on the costliest path
// of the trie through the node where p is registered, or would be: the
// patterns of each prefix of that path, and of the largest tail of each
// kind at each node. What evaluating a topic costs grows with it (about a
// nanosecond per instruction and byte of topic, at most), so the hub
// caps it.
func (ix *Index[T]) WorkThrough(p *Pattern) int {
	n, above := &ix.trie, 0
	for _, k := range p.keys {
		above += n.work
		if n = n.children[k]; n == nil {
			return above
		}
	}
	return above + n.downWork
}

// MaxWork returns the most that evaluating one topic can cost, in the
// terms of [Index.WorkThrough]: the costliest path of the trie.
func (ix *Index[T]) MaxWork() int { return ix.trie.downWork }

// PatternSize returns the estimated size of the distinct patterns
// registered (see [Cost]): what they keep of the heap, give or take.
func (ix *Index[T]) PatternSize() int { return ix.size }

// MaxPerTopic returns the most distinct patterns that one topic can be
// evaluated against: the patterns registered along one path of the trie.
// It is what one update topic may cost, so the hub caps it.
func (ix *Index[T]) MaxPerTopic() int { return ix.trie.down }

// Add registers v under one matcher. For URLPattern and URITemplate, pat
// is the compiled value (from [Compile], [CompileTemplate] or
// [Index.Shared]); for Exact, value is the topic.
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
	case URLPattern, URITemplate:
		ps := ix.patterns[pat.key]
		if ps == nil {
			ps = &Group[T]{pat: pat}
			ix.patterns[pat.key] = ps
			path := make([]*node[T], 1, len(pat.keys)+1)
			path[0] = &ix.trie
			fresh := make([]bool, 1, len(pat.keys)+1) // the nodes created
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
				fresh = append(fresh, c.count == 0 && len(c.children) == 0) // nodes are pruned once empty
				n = c
				path = append(path, n)
			}
			ix.npattern++
			ix.size += pat.cost.Size
			// One more pattern here can only raise the paths through n:
			// each node up the path learns its child's new maxima, as
			// far as they change.
			down, work := n.down, n.downWork
			n.add(ps)
			n.refresh()
			for i := len(path) - 2; i >= 0; i-- {
				a, c := path[i], path[i+1]
				if fresh[i+1] {
					down, work = -1, -1 // a child a did not count yet
				} else if c.down == down && c.downWork == work {
					break
				}
				prevDown, prevWork := a.down, a.downWork
				a.moved(down, work, c)
				down, work = prevDown, prevWork
			}
		}
		e.list, e.pattern = &ps.subs, ps
	}
	e.slot = len(e.list.vals)
	e.list.vals = append(e.list.vals, v)
	e.list.entries = append(e.list.entries, e)
	return e
}

// Exact returns the topic of an Exact subscription; ok is false for
// the other kinds.
func (e *Entry[T]) Exact() (topic string, ok bool) {
	return e.exact, e.pattern == nil && e.exact != ""
}

// Remove unregisters a subscription returned by Add. Removing twice is a no-op.
func (ix *Index[T]) Remove(e *Entry[T]) {
	l := e.list
	if l == nil {
		return
	}
	if l.readBy > ix.done.Load() {
		// A read in progress holds l.vals: leave it be, work on a copy,
		// which no read holds: a list is copied at most once per read.
		l.vals = append(make([]T, 0, cap(l.vals)), l.vals...)
		l.readBy = 0
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

func (ix *Index[T]) removePattern(ps *Group[T]) {
	delete(ix.patterns, ps.pat.key)
	ix.npattern--
	ix.size -= ps.pat.cost.Size
	path := make([]*node[T], 0, len(ps.pat.keys)+1)
	n := &ix.trie
	path = append(path, n)
	for _, k := range ps.pat.keys {
		n = n.children[k]
		path = append(path, n)
	}
	down, work := n.down, n.downWork
	n.remove(ps)
	n.refresh()
	// From the leaf up, each node learns its child's new maxima, as far
	// as they change, and prunes the child left empty.
	for i := len(path) - 2; i >= 0; i-- {
		a, c := path[i], path[i+1]
		gone := c.count == 0 && len(c.children) == 0
		if gone {
			delete(a.children, ps.pat.keys[i])
			c = nil
		} else if c.down == down && c.downWork == work {
			break
		}
		prevDown, prevWork := a.down, a.downWork
		a.moved(down, work, c)
		down, work = prevDown, prevWork
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

// BeginRead begins a look-up whose results the caller may read after it
// releases its lock: the lists that [Index.Exact] and [Index.Candidates]
// return until the matching [Index.EndRead] stay as they were, however
// the index changes meanwhile (a subscription removed since is still in
// them; one added since is not). Adding stays O(1); removing copies a
// list that a read in progress holds, once per read. One read at a time:
// the caller serializes them.
func (ix *Index[T]) BeginRead() (read uint64) {
	ix.reads++
	return ix.reads
}

// EndRead ends the read that BeginRead returned; it needs no lock.
func (ix *Index[T]) EndRead(read uint64) { ix.done.Store(read) }

// Exact appends to dst the subscriptions of "*" and those of each of
// topics, for read, skipping empty lists. A value registered under
// several matchers, or selected by several topics, is in several lists:
// the caller deduplicates (SUB-13). URL patterns are looked up apart (see
// [Index.Candidates]), so that the caller can evaluate them without its
// lock.
func (ix *Index[T]) Exact(read uint64, topics []string, dst [][]T) [][]T {
	if len(ix.wildcard.vals) > 0 {
		dst = append(dst, ix.wildcard.take(read))
	}
	for _, t := range topics {
		if l := ix.exact[t]; l != nil {
			dst = append(dst, l.take(read))
		}
	}
	return dst
}

// HasPatterns reports whether any URL pattern or URI template is registered.
func (ix *Index[T]) HasPatterns() bool { return ix.npattern > 0 }

// Candidates appends to dst, for read, the groups whose pattern must be
// evaluated against the resolved topic u, with their subscriptions:
// those whose literal prefix u has, at most [Index.MaxPerTopic] of them,
// less those whose tail key u does not have.
// The caller may evaluate them without the index's lock (patterns are
// immutable).
func (ix *Index[T]) Candidates(read uint64, u *topicurl.URL, dst []Candidate[T]) []Candidate[T] {
	n := &ix.trie
	depth := 0
	rest, pathDone := u.Pathname, false
	var pathTail, hrefTail tailKey
	tails := false // pathTail and hrefTail are set
	for {
		for _, g := range n.patterns {
			dst = append(dst, Candidate[T]{Group: g, Subs: g.subs.take(read)})
		}
		if n.tails != nil {
			if !tails {
				pathTail, hrefTail = topicTails(u)
				tails = true
			}
			for _, k := range [...]tailKey{pathTail, hrefTail} {
				if t := n.tails[k]; t != nil {
					for _, g := range t.groups {
						dst = append(dst, Candidate[T]{Group: g, Subs: g.subs.take(read)})
					}
				}
			}
		}
		if len(n.children) == 0 {
			return dst
		}
		var key string
		switch depth {
		case 0:
			key = u.Scheme
		case 1:
			key = u.Hostname
		default:
			if pathDone {
				return dst
			}
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				key, rest = rest[:i], rest[i+1:]
			} else {
				key, pathDone = rest, true
			}
		}
		n = n.children[key]
		if n == nil {
			return dst
		}
		depth++
	}
}
