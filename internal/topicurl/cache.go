package topicurl

import "sync/atomic"

// Cache keeps an event's topics resolved by one resolver, so that they
// are resolved once per event, not once per pattern or per stream. The
// zero value is empty and ready to use; a Cache is safe for concurrent
// use, and an event shared by hubs with different resolvers resolves
// again when the resolver changes.
type Cache struct {
	p atomic.Pointer[resolved]
}

type resolved struct {
	by   *Resolver
	urls []URL
}

// Resolve returns topics resolved by r, computing them on first use; the
// Href of a topic that does not parse is "" (MAT-8).
func (c *Cache) Resolve(r *Resolver, topics []string) []URL {
	if v := c.p.Load(); v != nil && v.by == r {
		return v.urls
	}
	urls := make([]URL, len(topics))
	for i, t := range topics {
		if u, ok := r.Resolve(t); ok {
			urls[i] = u
		}
	}
	c.p.Store(&resolved{by: r, urls: urls})
	return urls
}
