package engine

import (
	"slices"
	"sync"
	"time"

	"github.com/mercurekit/mercure/internal/index"
)

// The streams' interest is what the store's feed must bring the hub: the
// exact topics of every open stream and the hub's own topics, or every
// event while a stream has another matcher (a URL pattern, "*"). A store
// that can read less (see store.InterestStore) is told of each change
// through a Want, so that a hub reads the updates its subscribers want
// rather than every update of every hub sharing the store.
//
// The seam: a stream gets every event pushed after its registration
// (its start position is the engine's last position then). The store
// promises the events of a new topic appended after it was told of it.
// So a stream on a new topic first has the store told, waiting for that
// (Want records the change and returns: no network), and only then
// registers: an event of its topic pushed after its start position was
// appended after the store was told, since the start position is at or
// after the last event the feed delivered when it was told. Streams on
// topics the store already holds, the common case, wait for nothing and
// call no store; a topic that no stream needs any more stays with the
// store for InterestLinger, so that a subscriber that reconnects at once
// costs no change, and is then dropped, with the others that went
// meanwhile, in one change.

// Want applies a change of the streams' interest to the store's feed:
// whether it must read every event, and the exact topics it must read
// from now on in addition to, or no longer among, those it was given. It
// must not wait for the network.
type Want func(all bool, add, remove []string)

// DefaultInterestLinger is how long the store keeps reading a topic that
// no stream needs any more, unless Config.InterestLinger says otherwise.
const DefaultInterestLinger = 10 * time.Second

// interest tracks the streams' interest and tells the store of it.
type interest struct {
	mu     sync.Mutex
	want   Want // nil: the store reads everything, and nothing is tracked
	linger time.Duration
	own    map[string]struct{}
	// count is the open streams selecting each exact topic, others those
	// with another matcher.
	count  map[string]int
	others int
	// told is the topics the store was given and toldAll whether it was
	// told to read everything; told holds at least every topic counted.
	told    map[string]struct{}
	toldAll bool
	sweep   *time.Timer // set while a lazy drop is scheduled
	stopped bool
	// changes counts the calls of want, for tests.
	changes int
}

// FollowInterest has the engine tell want of every change of the
// streams' interest, beginning with own, the topics the hub needs
// whatever its streams, as the whole of it: it must be called before any
// stream opens, and once. Without it, the streams' interest is not
// tracked.
func (e *Engine) FollowInterest(want Want, own []string) {
	in := &e.interest
	in.mu.Lock()
	defer in.mu.Unlock()
	in.want = want
	in.linger = e.cfg.InterestLinger
	if in.linger <= 0 {
		in.linger = DefaultInterestLinger
	}
	in.own = make(map[string]struct{}, len(own))
	in.count = make(map[string]int)
	in.told = make(map[string]struct{}, len(own))
	for _, t := range own {
		in.own[t] = struct{}{}
		in.told[t] = struct{}{}
	}
	in.changes++
	want(false, slices.Clone(own), nil)
}

// acquire counts the interest of s, whose matchers are ms, before it
// registers, and tells the store of what it adds before returning.
func (e *Engine) acquire(s *Stream, ms []Matcher) {
	in := &e.interest
	if in.want == nil { // set before any stream opens: read without the lock
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopped {
		return
	}
	s.interested = true
	var add []string
	for _, m := range ms {
		if m.Kind != index.Exact {
			in.others++
			if !in.toldAll {
				in.toldAll = true
				in.changes++
				in.want(true, nil, nil)
			}
			continue
		}
		in.count[m.Value]++
		if _, ok := in.told[m.Value]; !ok {
			in.told[m.Value] = struct{}{}
			add = append(add, m.Value)
		}
	}
	if len(add) > 0 {
		in.changes++
		in.want(in.toldAll, add, nil)
	}
}

// releaseInterest uncounts the interest of s, whose matchers were ms:
// what no stream needs any more is dropped later (see sweepInterest).
func (e *Engine) releaseInterest(s *Stream, ms []Matcher) {
	in := &e.interest
	in.mu.Lock()
	defer in.mu.Unlock()
	if !s.interested {
		return
	}
	s.interested = false
	lost := false
	for _, m := range ms {
		if m.Kind != index.Exact {
			if in.others--; in.others == 0 {
				lost = true
			}
			continue
		}
		if in.count[m.Value]--; in.count[m.Value] <= 0 {
			delete(in.count, m.Value)
			lost = true
		}
	}
	if lost && in.sweep == nil && !in.stopped {
		in.sweep = time.AfterFunc(in.linger, e.sweepInterest)
	}
}

// matchersOf returns the matchers of s, registered: their kinds and
// exact topics, enough for releaseInterest.
func matchersOf(s *Stream) []Matcher {
	ms := make([]Matcher, len(s.entries))
	for i, en := range s.entries {
		if t, ok := en.Exact(); ok {
			ms[i] = Matcher{Kind: index.Exact, Value: t}
		} else {
			ms[i].Kind = index.Wildcard // any other kind: all the same here
		}
	}
	return ms
}

// sweepInterest tells the store of the topics that no stream needs any
// more, and that it need not read everything when no stream does.
func (e *Engine) sweepInterest() {
	in := &e.interest
	in.mu.Lock()
	defer in.mu.Unlock()
	in.sweep = nil
	if in.stopped {
		return
	}
	var remove []string
	for t := range in.told {
		_, own := in.own[t]
		if in.count[t] == 0 && !own {
			remove = append(remove, t)
			delete(in.told, t)
		}
	}
	all := in.others > 0
	if len(remove) > 0 || all != in.toldAll {
		in.toldAll = all
		in.changes++
		in.want(all, nil, remove)
	}
}

// stopInterest stops telling the store: the hub stops listening.
func (e *Engine) stopInterest() {
	in := &e.interest
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stopped = true
	if in.sweep != nil {
		in.sweep.Stop()
		in.sweep = nil
	}
}

// Reads reports whether the store's feed was told to read the events of
// topics, as far as the engine knows: true when it reads everything.
func (e *Engine) Reads(topics []string) bool {
	in := &e.interest
	if in.want == nil {
		return true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.toldAll {
		return true
	}
	for _, t := range topics {
		if _, ok := in.told[t]; ok {
			return true
		}
	}
	return false
}

// Interest returns what the store was told to read, sorted, and how many
// times it was told of a change: for tests.
func (e *Engine) Interest() (all bool, topics []string, changes int) {
	in := &e.interest
	in.mu.Lock()
	defer in.mu.Unlock()
	for t := range in.told {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return in.toldAll, topics, in.changes
}
