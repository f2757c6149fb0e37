package index

import (
	lru "container/list"
	"fmt"
	"sync"

	"github.com/mercurekit/mercure/internal/topicurl"
)

// Cache compiles URL patterns and URI templates for one hub and keeps the most recently used
// ones, so that a pattern written by many subscribers, or granted by a
// token that is verified again and again, is compiled once. It is bounded
// by the estimated size of what it keeps (see [Cost]); patterns in use
// stay alive through their users whatever it evicts. It is safe for
// concurrent use.
type Cache struct {
	hubURL   string
	resolver *topicurl.Resolver
	maxSize  int

	mu       sync.Mutex
	entries  map[string]*cacheEntry
	compiles int      // patterns compiled, for tests
	recent   lru.List // of *cacheEntry, most recent first
	size     int      // estimated size of the compiled entries
}

type cacheEntry struct {
	key  string
	pat  *Pattern
	err  error
	done chan struct{} // closed once compiled
	elem *lru.Element  // nil while compiling
}

// NewCache returns a cache compiling patterns against hubURL and keeping
// compiled patterns of at most maxSize estimated size in all.
func NewCache(hubURL string, r *topicurl.Resolver, maxSize int) *Cache {
	return &Cache{hubURL: hubURL, resolver: r, maxSize: maxSize, entries: make(map[string]*cacheEntry)}
}

// Get returns the compiled pattern raw, compiling it unless it is cached,
// provided its estimated cost is within lim: a pattern over lim is never
// compiled, and a cached one is checked against the cost it was compiled
// with, not estimated again. Concurrent calls for the same pattern
// compile it once. Patterns that fail to compile are not kept.
func (c *Cache) Get(raw string, lim Limit) (*Pattern, error) {
	return c.get(raw, raw, lim, EstimateCost, func(cost Cost) (*Pattern, error) {
		return compile(raw, cost, c.hubURL, c.resolver)
	})
}

// GetTemplate is [Cache.Get] for the URI template raw (see
// [CompileTemplate]).
func (c *Cache) GetTemplate(raw string, lim Limit) (*Pattern, error) {
	estimate := func(raw string) (Cost, error) { return EstimateTemplateCost(raw), nil }
	return c.get(templateKey(raw), raw, lim, estimate, func(cost Cost) (*Pattern, error) {
		return compileTemplate(raw, cost, c.resolver)
	})
}

// get returns the pattern interned under key, compiling raw unless it is
// cached.
func (c *Cache) get(key, raw string, lim Limit, estimate func(string) (Cost, error), compile func(Cost) (*Pattern, error)) (*Pattern, error) {
	c.mu.Lock()
	e := c.entries[key]
	if e != nil && e.elem != nil {
		c.recent.MoveToFront(e.elem)
		c.mu.Unlock()
		return e.pat, lim.Check(raw, e.pat.cost)
	}
	c.mu.Unlock()
	if e != nil {
		<-e.done // another caller is compiling it
		if e.err != nil {
			return nil, e.err
		}
		return e.pat, lim.Check(raw, e.pat.cost)
	}
	cost, err := estimate(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrPattern, raw)
	}
	if err := lim.Check(raw, cost); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.entries[key] != nil {
		c.mu.Unlock()
		return c.get(key, raw, lim, estimate, compile) // compiled or being compiled meanwhile
	}
	e = &cacheEntry{key: key, done: make(chan struct{})}
	c.entries[key] = e
	c.compiles++
	c.mu.Unlock()

	// Compiling takes tens of microseconds or more: not under the lock.
	e.pat, e.err = compile(cost)
	c.mu.Lock()
	if e.err != nil {
		delete(c.entries, key)
	} else {
		e.elem = c.recent.PushFront(e)
		c.size += e.pat.cost.Size
		// The newest stays, whatever its size.
		for c.size > c.maxSize && c.recent.Len() > 1 {
			old := c.recent.Remove(c.recent.Back()).(*cacheEntry)
			delete(c.entries, old.key)
			c.size -= old.pat.cost.Size
		}
	}
	c.mu.Unlock()
	close(e.done)
	return e.pat, e.err
}

// Compiles returns how many times the cache compiled a pattern.
func (c *Cache) Compiles() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compiles
}

// Len returns the number of compiled patterns kept.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recent.Len()
}
