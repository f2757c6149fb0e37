package token

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// DefaultCacheSize is how many verified tokens a Verifier remembers unless
// Options.CacheSize says otherwise.
const DefaultCacheSize = 4096

// cache remembers the tokens a Verifier accepted, so that a publisher
// sending the same token thousands of times, or a crowd of browsers
// reconnecting at once, has its signature checked once. An entry is keyed
// by a SHA-256 digest of the role and the whole raw token: constant
// memory per key, and no token can pass for another short of a hash
// collision. A hit is re-checked for what time or the keys can change:
// exp, nbf and iat (a clock may also step back), and, for an issuer whose
// keys are fetched, that its key set is still the one that verified the
// token, so that a key removed from the set stops validating at once.
type cache struct {
	max int

	mu      sync.Mutex
	entries map[[sha256.Size]byte]*list.Element
	recent  list.List // of *cacheEntry, most recently used first
}

type cacheEntry struct {
	key      [sha256.Size]byte
	tok      *Token
	nbf, iat time.Time // zero when absent
	// set is the key set of a dynamic issuer that verified the token;
	// nil for a static issuer, whose keys never change.
	set jwk.Set
}

func newCache(max int) *cache {
	return &cache{max: max, entries: make(map[[sha256.Size]byte]*list.Element)}
}

// cacheKey digests what a cached verdict depends on besides time and keys:
// the role (a token verifies with the keys of one role only) and the token.
func cacheKey(raw string, role Role) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte{byte(role)})
	h.Write([]byte(raw))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// get returns the entry for key, or nil; the caller re-checks it.
func (c *cache) get(key [sha256.Size]byte) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	c.recent.MoveToFront(el)
	return el.Value.(*cacheEntry)
}

// put remembers a verified token, evicting the least recently used entry
// beyond c.max.
func (c *cache) put(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		el.Value = e
		c.recent.MoveToFront(el)
		return
	}
	c.entries[e.key] = c.recent.PushFront(e)
	for c.recent.Len() > c.max {
		old := c.recent.Remove(c.recent.Back()).(*cacheEntry)
		delete(c.entries, old.key)
	}
}

// drop forgets key: its token expired or its keys changed.
func (c *cache) drop(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.recent.Remove(el)
		delete(c.entries, key)
	}
}

// len returns the number of tokens remembered.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recent.Len()
}
