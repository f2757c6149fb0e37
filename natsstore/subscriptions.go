package natsstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/store"
)

// DefaultSubscriptionTTL is how long the subscriptions of a store that
// stopped refreshing them (its process died) stay listed (see
// [WithSubscriptionTTL]).
const DefaultSubscriptionTTL = 15 * time.Second

// WithSubscriptionTTL sets how long the subscriptions shared by a store
// outlive it when its process dies without [Store.Close]: the store
// tells that it is alive every third of d, which must be at least a
// second. The default is [DefaultSubscriptionTTL].
func WithSubscriptionTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("%w: natsstore.WithSubscriptionTTL(%v) is under a second", mercure.ErrInvalidOption, d)
		}
		c.subTTL = d
		return nil
	}
}

// Layout of the shared subscriptions: two key-value buckets. NAME_subs
// maps HUB.ID to the JSON document of the subscription ID (base64url) of
// the store HUB (a random name); NAME_hubs holds a key HUB for each
// store that is alive, which expires unless the store writes it again.
// Listing skips, and purges, the subscriptions of the stores whose key
// has expired.

// presence shares a store's active subscriptions in the buckets. Changes
// are written by one background writer, batched: the changes of
// concurrent callers are published together. The store keeps its own
// subscriptions in memory, writes them all again when the servers may
// have lost them, and lists them from memory.
type presence struct {
	s          *Store
	name       string // this store's name in the buckets
	subs, hubs jetstream.KeyValue

	mu      sync.Mutex
	cond    *sync.Cond        // signalled after each write
	local   map[string][]byte // this store's subscriptions
	changed map[string]bool   // ids to write: true to put, false to delete
	rewrite bool              // write every local subscription again
	stopped bool
	gen     uint64 // counts the calls of UpdateSubscriptions
	written uint64 // the gen whose changes the servers have
	failed  uint64 // the gen whose write failed last, with failErr
	failErr error
	wake    chan struct{}
	done    chan struct{} // closed by stop
}

func (p *presence) init(ctx context.Context, s *Store) error {
	p.s = s
	p.name = strings.ReplaceAll(uuid.NewString(), "-", "")
	p.local = make(map[string][]byte)
	p.changed = make(map[string]bool)
	p.cond = sync.NewCond(&p.mu)
	p.wake = make(chan struct{}, 1)
	p.done = make(chan struct{})
	storage := jetstream.FileStorage
	if s.cfg.memory {
		storage = jetstream.MemoryStorage
	}
	err := create(ctx, func(ctx context.Context) (err error) {
		p.subs, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: s.name + "_subs", Description: "Mercure hub subscriptions (natsstore)",
			History: 1, Storage: storage, Replicas: s.cfg.replicas,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("subscriptions bucket: %w", err)
	}
	err = create(ctx, func(ctx context.Context) (err error) {
		p.hubs, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: s.name + "_hubs", Description: "Mercure hubs alive (natsstore)",
			History: 1, TTL: s.cfg.subTTL, Storage: storage, Replicas: s.cfg.replicas,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("hubs bucket: %w", err)
	}
	if _, err := p.hubs.Put(ctx, p.name, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("hubs bucket: %w", err)
	}
	s.wg.Add(1)
	go p.writer()
	return nil
}

// key is the key of the subscription id of this store.
func (p *presence) key(id string) string {
	return p.name + "." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// UpdateSubscriptions records changes of the subscriptions of the hub
// using the store: an active one is added (or replaced), an inactive one
// removed. It implements [store.SubscriptionStore]: it returns once the
// servers have the changes, with those of concurrent callers published
// together, or with the error of that write, or when ctx ends. The store
// keeps the changes in any case, retries, and keeps them listed by every
// store on the stream while this one lives (see [WithSubscriptionTTL]).
func (s *Store) UpdateSubscriptions(ctx context.Context, subs []store.Subscription) error {
	p := &s.presence
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
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
	select {
	case p.wake <- struct{}{}:
	default:
	}
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	for p.written < gen {
		switch {
		case p.failed >= gen:
			return fmt.Errorf("natsstore: sharing subscriptions: %w", p.failErr)
		case ctx.Err() != nil:
			return ctx.Err()
		case p.stopped:
			return ErrClosed
		}
		p.cond.Wait()
	}
	return nil
}

// writer publishes the changes, and tells the store alive every third of
// the TTL, until stop.
func (p *presence) writer() {
	defer p.s.wg.Done()
	alive := time.NewTicker(p.s.cfg.subTTL / 3)
	defer alive.Stop()
	backoff := minBackoff
	var retry <-chan time.Time
	for {
		select {
		case <-p.done:
			return
		case <-alive.C:
			ctx, cancel := context.WithTimeout(p.s.ctx, p.s.cfg.timeout)
			_, _ = p.hubs.Put(ctx, p.name, []byte(time.Now().UTC().Format(time.RFC3339)))
			cancel()
			continue
		case <-p.wake:
		case <-retry:
		}
		retry = nil
		if err := p.flush(); err != nil {
			retry = time.After(backoff)
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = minBackoff
		}
	}
}

// flush publishes the pending changes, at once, and waits for their
// acknowledgments.
func (p *presence) flush() error {
	p.mu.Lock()
	gen := p.gen
	changes := p.changed
	if p.rewrite {
		for id := range p.local {
			changes[id] = true
		}
	}
	rewrite := p.rewrite
	p.changed, p.rewrite = make(map[string]bool), false
	docs := make(map[string][]byte, len(changes))
	for id, active := range changes {
		if active {
			docs[id] = p.local[id]
		}
	}
	p.mu.Unlock()
	err := p.publish(changes, docs, rewrite)
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.cond.Broadcast()
	if err != nil {
		// Keep what failed unless a later call changed it again.
		for id, active := range changes {
			if _, again := p.changed[id]; !again {
				p.changed[id] = active
			}
		}
		p.rewrite = p.rewrite || rewrite
		p.failed, p.failErr = gen, err
		return err
	}
	p.written = max(p.written, gen)
	return nil
}

func (p *presence) publish(changes map[string]bool, docs map[string][]byte, alive bool) error {
	if len(changes) == 0 && !alive {
		return nil
	}
	ctx, cancel := context.WithTimeout(p.s.ctx, p.s.cfg.timeout)
	defer cancel()
	if alive {
		if _, err := p.hubs.Put(ctx, p.name, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
			return err
		}
	}
	futures := make([]jetstream.PubAckFuture, 0, len(changes))
	bucket := "$KV." + p.s.name + "_subs."
	for id, active := range changes {
		m := &nats.Msg{Subject: bucket + p.key(id), Data: docs[id]}
		if !active {
			m.Header = nats.Header{"KV-Operation": []string{"PURGE"}, "Nats-Rollup": []string{"sub"}}
		}
		f, err := p.s.js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// lost records that the servers may have lost this store's writes: the
// next reconnected writes them all again.
func (p *presence) lost() {
	p.mu.Lock()
	p.rewrite = true
	p.mu.Unlock()
}

// reconnected has the writer write every subscription again if the
// servers may have lost them.
func (p *presence) reconnected() {
	p.mu.Lock()
	r := p.rewrite
	p.mu.Unlock()
	if r {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// stop ends the writer; the callers waiting get ErrClosed.
func (p *presence) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		close(p.done)
		p.cond.Broadcast()
	}
}

// withdraw removes this store's subscriptions and its key, best effort:
// they expire anyway.
func (p *presence) withdraw() {
	ctx, cancel := context.WithTimeout(context.Background(), p.s.cfg.timeout)
	defer cancel()
	_ = p.hubs.Purge(ctx, p.name)
	p.purge(ctx, p.name)
}

// purge removes the subscriptions of the store name.
func (p *presence) purge(ctx context.Context, name string) {
	st, err := p.s.js.Stream(ctx, "KV_"+p.s.name+"_subs")
	if err != nil {
		return
	}
	_ = st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+p.s.name+"_subs."+name+".>"))
}

// Subscriptions returns the active subscriptions of every store on the
// stream, in no particular order: this store's from memory, the others'
// from the bucket, but those of stores that are no longer alive (see
// [WithSubscriptionTTL]), which it purges. It implements
// [store.SubscriptionStore].
func (s *Store) Subscriptions(ctx context.Context) ([]store.Subscription, error) {
	p := &s.presence
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	alive := map[string]bool{}
	names, err := p.hubs.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("natsstore: subscriptions: %w", err)
	}
	for n := range names.Keys() {
		alive[n] = true
	}
	_ = names.Stop() // done: it reports the closed subscription
	w, err := p.subs.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("natsstore: subscriptions: %w", err)
	}
	defer w.Stop()
	var out []store.Subscription
	dead := map[string]bool{}
	for done := false; !done; {
		select {
		case e := <-w.Updates():
			if e == nil {
				done = true
				break
			}
			hub, enc, ok := strings.Cut(e.Key(), ".")
			if !ok || hub == p.name {
				continue
			}
			if !alive[hub] {
				dead[hub] = true
				continue
			}
			id, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil {
				continue
			}
			out = append(out, store.Subscription{ID: string(id), Active: true, JSON: slices.Clone(e.Value())})
		case <-ctx.Done():
			return nil, fmt.Errorf("natsstore: subscriptions: %w", ctx.Err())
		}
	}
	for hub := range dead {
		p.purge(ctx, hub)
	}
	p.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(p.local)) {
		out = append(out, store.Subscription{ID: id, Active: true, JSON: slices.Clone(p.local[id])})
	}
	p.mu.Unlock()
	return out, nil
}
