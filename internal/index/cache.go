package index

import (
	lru "container/list"
	"sync"

	"github.com/mercurekit/mercure/internal/topicurl"
)

// Cache compiles URL patterns for one hub and keeps the most recently used
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
	raw  string
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

// Get returns the compiled pattern raw, compiling it unless it is cached.
// Concurrent calls for the same pattern compile it once. The caller
// checks the pattern's estimated cost before calling Get: Get compiles
// whatever it is given. Patterns that fail to compile are not kept.
func (c *Cache) Get(raw string) (*Pattern, error) {
	c.mu.Lock()
	if e := c.entries[raw]; e != nil {
		if e.elem != nil {
			c.recent.MoveToFront(e.elem)
			c.mu.Unlock()
			return e.pat, nil
		}
		c.mu.Unlock()
		<-e.done // another caller is compiling it
		return e.pat, e.err
	}
	e := &cacheEntry{raw: raw, done: make(chan struct{})}
	c.entries[raw] = e
	c.compiles++
	c.mu.Unlock()

	// Compiling takes tens of microseconds or more: not under the lock.
	e.pat, e.err = Compile(raw, c.hubURL, c.resolver)
	c.mu.Lock()
	if e.err != nil {
		delete(c.entries, raw)
	} else {
		e.elem = c.recent.PushFront(e)
		c.size += e.pat.cost.Size
		// The newest stays, whatever its size.
		for c.size > c.maxSize && c.recent.Len() > 1 {
			old := c.recent.Remove(c.recent.Back()).(*cacheEntry)
			delete(c.entries, old.raw)
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
