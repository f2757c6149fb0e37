package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/store"
)

// DefaultSubscriptionTTL is how long the subscriptions of a store that
// stopped refreshing them (its process died) stay listed (see
// [WithSubscriptionTTL]).
const DefaultSubscriptionTTL = 15 * time.Second

// WithSubscriptionTTL sets how long the subscriptions shared by a store
// outlive it when its process dies without [Store.Close]: the store
// refreshes them every third of d, which must be positive. The default
// is [DefaultSubscriptionTTL].
func WithSubscriptionTTL(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: redisstore.WithSubscriptionTTL(%v) is not positive", mercure.ErrInvalidOption, d)
		}
		c.subTTL = d
		return nil
	}
}

// Layout of the shared subscriptions: the set stream+":hubs" names the
// stores that share some; the hash stream+":subs:"+name of each maps a
// subscription id to its JSON document and expires unless its store
// refreshes it. Its field genField holds the number of the store's last
// write: a hash whose number is behind it lost writes (a failover to a
// replica that had not received them), and the store rewrites it.
// Listing skips (and forgets) the stores whose hash is gone.

// genField is the field of a store's hash that numbers its writes; no
// subscription id is an empty string.
const genField = ""

// listLua returns the ids and documents of every store's hash but
// ARGV[2]'s, flattened (id, document, id, document…), and removes from the
// set the stores whose hash has expired or is empty.
//
// KEYS: the set. ARGV: the hash key prefix, the caller's name.
const listLua = `
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if name ~= ARGV[2] then
    local pairs = redis.call('HGETALL', ARGV[1] .. name)
    if #pairs == 0 then
      redis.call('SREM', KEYS[1], name)
    else
      for i = 1, #pairs - 1, 2 do
        if pairs[i] ~= '' then -- the number of the writes (genField)
          out[#out + 1] = pairs[i]
          out[#out + 1] = pairs[i + 1]
        end
      end
    end
  end
end
return out
`

// presence shares a store's active subscriptions in Redis. Changes are
// written by one background writer, batched: concurrent callers share a
// transaction. The store keeps its own set in memory, rewrites it whenever
// Redis may have lost it, and lists it from memory.
type presence struct {
	s          *Store
	name       string // this store's name in the set
	set, hash  string // keys
	listScript *redis.Script

	mu      sync.Mutex
	local   map[string][]byte // id → JSON of this store's active subscriptions
	changed map[string]bool   // ids changed since the last write: true if active
	resync  bool              // rewrite the whole hash at the next write
	started bool              // the writer runs
	wake    chan struct{}
	gen     uint64 // counts the calls of UpdateSubscriptions
	written uint64 // the gen whose changes Redis has
	failed  uint64 // the gen whose write failed last, with failErr
	failErr error
	writes  uint64        // the number of this store's last write, in its hash
	flushed chan struct{} // closed, and replaced, after each write
}

func (p *presence) init(s *Store) {
	p.s = s
	p.name = uuid.NewString()
	p.set = s.stream + ":hubs"
	p.hash = s.stream + ":subs:" + p.name
	p.listScript = redis.NewScript(listLua)
	p.local = make(map[string][]byte)
	p.changed = make(map[string]bool)
	p.wake = make(chan struct{}, 1)
	p.flushed = make(chan struct{})
}

// UpdateSubscriptions records changes of the subscriptions of the hub
// using the store: an active one is added (or replaced), an inactive one
// removed. It implements [store.SubscriptionStore]: it returns once
// Redis has the changes, with those of concurrent callers in one
// transaction, or with the error of that write, or when ctx ends. The
// store keeps the changes in any case, retries, and keeps them visible to
// every store on the stream while this one lives (see
// [WithSubscriptionTTL]).
//
// Keys: the set stream+":hubs" names the stores sharing subscriptions;
// the hash stream+":subs:"+name of each holds its subscriptions' JSON and
// expires unless its store refreshes it.
func (s *Store) UpdateSubscriptions(ctx context.Context, subs []store.Subscription) error {
	p := &s.presence
	p.mu.Lock()
	if s.closed() {
		p.mu.Unlock()
		return ErrClosed
	}
	for _, sub := range subs {
		if sub.Active {
			p.local[sub.ID] = slices.Clone(sub.JSON)
		} else {
			delete(p.local, sub.ID)
		}
		p.changed[sub.ID] = sub.Active
	}
	p.gen++
	gen := p.gen
	if !p.started {
		p.started = true
		s.wg.Add(1)
		go p.writer()
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
	for p.written < gen {
		if p.failed >= gen {
			err := p.failErr
			p.mu.Unlock()
			return fmt.Errorf("redisstore: sharing subscriptions: %w", err)
		}
		flushed := p.flushed
		p.mu.Unlock()
		select {
		case <-flushed:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return ErrClosed
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// Subscriptions returns the active subscriptions of every store on the
// stream, in no particular order: this store's from memory, the others'
// from Redis. It implements [store.SubscriptionStore].
func (s *Store) Subscriptions(ctx context.Context) ([]store.Subscription, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	p := &s.presence
	pairs, err := call(s, ctx, func(ctx context.Context) ([]string, error) {
		return p.listScript.Run(ctx, s.rdb, []string{p.set}, s.stream+":subs:", p.name).StringSlice()
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: listing subscriptions: %w", err)
	}
	p.mu.Lock()
	subs := make([]store.Subscription, 0, len(pairs)/2+len(p.local))
	for id, doc := range p.local {
		subs = append(subs, store.Subscription{ID: id, Active: true, JSON: doc})
	}
	p.mu.Unlock()
	for i := 0; i+1 < len(pairs); i += 2 {
		subs = append(subs, store.Subscription{ID: pairs[i], Active: true, JSON: []byte(pairs[i+1])})
	}
	return subs, nil
}

// writer sends the changes as they come and refreshes the hash's expiry,
// until the store closes.
func (p *presence) writer() {
	defer p.s.wg.Done()
	ttl := p.s.cfg.subTTL
	refresh := time.NewTicker(ttl / 3)
	defer refresh.Stop()
	backoff := p.s.cfg.presenceBackoff
	for {
		select {
		case <-p.wake:
		case <-refresh.C:
		case <-p.s.ctx.Done():
			return
		}
		if err := p.write(); err != nil {
			// Retry soon, and from scratch: Redis may have lost the hash.
			// A new change cuts the wait short: its caller is waiting.
			p.mu.Lock()
			p.resync = true
			p.mu.Unlock()
			select {
			case <-time.After(backoff):
			case <-p.wake:
			case <-p.s.ctx.Done():
				return
			}
			backoff = nextBackoff(backoff)
			select {
			case p.wake <- struct{}{}:
			default:
			}
			continue
		}
		backoff = p.s.cfg.presenceBackoff
	}
}

// write sends the pending changes, or the whole set when Redis may have
// lost it, and refreshes the expiry, in one transaction.
func (p *presence) write() error {
	p.mu.Lock()
	gen, resync, changed := p.gen, p.resync, p.changed
	var all map[string][]byte
	if resync {
		all = maps.Clone(p.local)
	}
	p.changed = make(map[string]bool)
	p.resync = false
	set := make([]any, 0, 2*len(changed))
	var del []string
	for id, active := range changed {
		if b, ok := p.local[id]; ok && active {
			set = append(set, id, b)
		} else if !active {
			del = append(del, id)
		}
	}
	// Whether the hash must hold more than this write sets: if it turns
	// out to be gone, those others were lost with it.
	others := len(p.local) > len(set)/2
	p.mu.Unlock()

	s := p.s
	ttl := s.cfg.subTTL
	// Only the writer writes: p.writes needs no lock.
	prev, next := p.writes, p.writes+1
	var held *redis.SliceCmd
	_, err := call(s, s.ctx, func(ctx context.Context) ([]redis.Cmder, error) {
		return s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			// First: the number of the last write the hash holds, before
			// the changes recreate it or this write numbers it.
			held = pipe.HMGet(ctx, p.hash, genField) // nil, not an error, when missing
			if resync {
				pipe.Del(ctx, p.hash)
				for id, b := range all {
					pipe.HSet(ctx, p.hash, id, b)
				}
			} else {
				if len(set) > 0 {
					pipe.HSet(ctx, p.hash, set...)
				}
				if len(del) > 0 {
					pipe.HDel(ctx, p.hash, del...)
				}
			}
			pipe.HSet(ctx, p.hash, genField, next)
			pipe.PExpire(ctx, p.hash, ttl)
			pipe.SAdd(ctx, p.set, p.name)
			return nil
		})
	})
	if err == nil {
		p.writes = next
	}
	if err != nil {
		p.mu.Lock()
		// Keep the changes for the next attempt, under newer ones.
		for id, active := range changed {
			if _, newer := p.changed[id]; !newer {
				p.changed[id] = active
			}
		}
		p.failed, p.failErr = gen, err
		close(p.flushed)
		p.flushed = make(chan struct{})
		p.mu.Unlock()
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.written = max(p.written, gen)
	close(p.flushed)
	p.flushed = make(chan struct{})
	var n uint64
	if v := held.Val(); len(v) == 1 {
		n, _ = strconv.ParseUint(str(v[0]), 10, 64)
	}
	if !resync && n != prev && (others || len(del) > 0 || n != 0) {
		// The hash was gone (expired, or Redis lost it) while this store
		// had subscriptions besides those just written, or it lacks the
		// last writes (a failover to a replica that had not received
		// them): what they removed may be listed, and what they added
		// missing. Rewrite it now.
		p.resync = true
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// withdraw removes this store's subscriptions from Redis, once the writer
// has stopped. Best effort: they expire anyway.
func (p *presence) withdraw() {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if !started {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.s.cfg.timeout)
	defer cancel()
	p.s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Del(ctx, p.hash)
		pipe.SRem(ctx, p.set, p.name)
		return nil
	})
}
