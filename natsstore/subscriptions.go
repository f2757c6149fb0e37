package natsstore

import (
	"context"
	"encoding/base64"
	"errors"
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
// store that is alive, which expires unless the store writes it again:
// each key has its store's TTL (a message TTL: the stores sharing the
// buckets may have different ones, which a bucket's own TTL could not
// follow).
// Listing skips, and purges, the subscriptions of the stores whose key
// has expired. A store writes its key before its subscriptions, and a
// listing reads the subscriptions before the keys: a store whose
// subscriptions it reads is alive in the keys it reads next, unless its
// key expired meanwhile.
//
// A store that writes all its subscriptions again (the servers may have
// lost them, or its key expired while it lives, and another store purged
// them as a dead store's) does so under a new name, then purges those
// of its former name: a purge of its subscriptions that another store
// decided before the rewrite, and makes after, hits the former name
// only.

// presence shares a store's active subscriptions in the buckets. Changes
// are written by one background writer, batched: the changes of
// concurrent callers are published together. The store keeps its own
// subscriptions in memory, writes them all again when the servers may
// have lost them, and lists them from memory.
type presence struct {
	s          *Store
	subs, hubs jetstream.KeyValue

	mu      sync.Mutex
	cond    *sync.Cond        // signalled after each write
	name    string            // this store's name in the buckets
	former  map[string]bool   // its former names, whose entries are to purge
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

	// The writer's own.
	rev        uint64 // the revision of the key name in NAME_hubs, as written
	announced  bool   // whether the key name was written
	reconnects uint64 // the connection's reconnects at the last write
}

func newName() string { return strings.ReplaceAll(uuid.NewString(), "-", "") }

func (p *presence) init(ctx context.Context, s *Store) error {
	p.s = s
	p.name = newName()
	p.former = make(map[string]bool)
	p.local = make(map[string][]byte)
	p.changed = make(map[string]bool)
	p.cond = sync.NewCond(&p.mu)
	p.wake = make(chan struct{}, 1)
	p.done = make(chan struct{})
	var err error
	if p.subs, p.hubs, err = p.buckets(ctx); err != nil {
		return err
	}
	if p.rev, err = p.announce(ctx, p.name, 0); err != nil {
		return fmt.Errorf("hubs bucket: %w", err)
	}
	p.announced = true
	p.reconnects = s.nc.Stats().Reconnects
	s.wg.Add(1)
	go p.writer()
	return nil
}

// buckets creates the two buckets, or updates them to the store's
// settings.
func (p *presence) buckets(ctx context.Context) (subs, hubs jetstream.KeyValue, err error) {
	s := p.s
	storage := jetstream.FileStorage
	if s.cfg.memory {
		storage = jetstream.MemoryStorage
	}
	// create: hubs starting at once on a cluster may not get an answer
	// to the same creation (see create).
	err = create(ctx, func(ctx context.Context) (err error) {
		subs, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: s.name + "_subs", Description: "Mercure hub subscriptions (natsstore)",
			History: 1, Storage: storage, Replicas: s.cfg.replicas,
		})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("subscriptions bucket: %w", err)
	}
	err = create(ctx, func(ctx context.Context) (err error) {
		hubs, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: s.name + "_hubs", Description: "Mercure hubs alive (natsstore)",
			History: 1, Storage: storage, Replicas: s.cfg.replicas,
			LimitMarkerTTL: time.Minute, // message TTLs, and markers for the keys they remove
		})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("hubs bucket: %w", err)
	}
	return subs, hubs, nil
}

// announce writes the key name in NAME_hubs, with the store's TTL, and
// returns its revision; with rev not 0, only if that is still the key's
// revision (the key did not expire, nor was it purged or written by
// another).
func (p *presence) announce(ctx context.Context, name string, rev uint64) (uint64, error) {
	opts := []jetstream.PublishOpt{jetstream.WithMsgTTL(p.s.cfg.subTTL)}
	if rev != 0 {
		opts = append(opts, jetstream.WithExpectLastSequencePerSubject(rev))
	}
	m := &nats.Msg{Subject: "$KV." + p.s.name + "_hubs." + name, Data: []byte(time.Now().UTC().Format(time.RFC3339))}
	ack, err := p.s.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// key is the key of the subscription id of the store name.
func key(name, id string) string {
	return name + "." + base64.RawURLEncoding.EncodeToString([]byte(id))
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
// the TTL, until stop. When that fails (the key is gone: it expired, the
// servers lost it, another store purged it), it writes everything again.
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
			if retry != nil || p.refresh() == nil {
				continue // a retry to come writes the key anyway
			}
			p.lost()
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

// refresh writes the store's key again, if it is still the one the
// store wrote last.
func (p *presence) refresh() error {
	ctx, cancel := context.WithTimeout(p.s.ctx, p.s.cfg.timeout)
	defer cancel()
	p.mu.Lock()
	name := p.name
	p.mu.Unlock()
	rev, err := p.announce(ctx, name, p.rev)
	if err == nil {
		p.rev = rev
	}
	return err
}

// flush publishes the pending changes, at once, and waits for their
// acknowledgments; or, when the servers may have lost the store's
// entries, writes them all under a new name.
func (p *presence) flush() error {
	// A connection that reconnected since the last write may be to
	// servers that lost the store's writes (restarted without their
	// data), whether the feed noticed or not.
	reconnects := p.s.nc.Stats().Reconnects
	p.mu.Lock()
	p.rewrite = p.rewrite || reconnects != p.reconnects
	gen := p.gen
	changes := p.changed
	rewrite := p.rewrite
	if rewrite {
		// A new name has none of the former's entries: only the current
		// subscriptions are to write.
		changes = make(map[string]bool, len(p.local))
		for id := range p.local {
			changes[id] = true
		}
		if p.announced {
			p.former[p.name] = true
			p.name, p.announced = newName(), false
		}
	}
	name := p.name
	p.changed, p.rewrite = make(map[string]bool), false
	docs := make(map[string][]byte, len(changes))
	for id, active := range changes {
		if active {
			docs[id] = p.local[id]
		}
	}
	p.mu.Unlock()
	err := p.publish(name, changes, docs, rewrite)
	if err == nil && rewrite {
		p.reconnects = reconnects
		p.purgeFormer()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.cond.Broadcast()
	if err != nil {
		// Keep what failed unless a later call changed it again, and
		// write everything again: what the servers lost is unknown (the
		// buckets, with their data).
		for id, active := range changes {
			if _, again := p.changed[id]; !again {
				p.changed[id] = active
			}
		}
		p.rewrite = true
		p.failed, p.failErr = gen, err
		return err
	}
	p.written = max(p.written, gen)
	return nil
}

// publish writes changes under the store name: first its key, and the
// buckets if the servers lost them, when alive is true.
func (p *presence) publish(name string, changes map[string]bool, docs map[string][]byte, alive bool) error {
	if len(changes) == 0 && !alive {
		return nil
	}
	ctx, cancel := context.WithTimeout(p.s.ctx, p.s.cfg.timeout)
	defer cancel()
	if alive {
		if _, _, err := p.buckets(ctx); err != nil {
			return err
		}
		rev, err := p.announce(ctx, name, 0)
		if err != nil {
			return err
		}
		p.rev, p.announced = rev, true
	}
	futures := make([]jetstream.PubAckFuture, 0, len(changes))
	bucket := "$KV." + p.s.name + "_subs."
	for id, active := range changes {
		m := &nats.Msg{Subject: bucket + key(name, id), Data: docs[id]}
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

// purgeFormer removes the entries of the store's former names, best
// effort: those it fails to remove are tried again after the next
// rewrite, and expire or are purged by the other stores anyway.
func (p *presence) purgeFormer() {
	p.mu.Lock()
	names := slices.Collect(maps.Keys(p.former))
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.s.ctx, p.s.cfg.timeout)
	defer cancel()
	for _, name := range names {
		if p.purge(ctx, name) == nil {
			p.mu.Lock()
			delete(p.former, name)
			p.mu.Unlock()
		}
	}
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

// withdraw removes this store's subscriptions and its key, under its
// name and its former ones, best effort: they expire anyway. The writer
// has stopped.
func (p *presence) withdraw() {
	ctx, cancel := context.WithTimeout(context.Background(), p.s.cfg.timeout)
	defer cancel()
	p.mu.Lock()
	names := append(slices.Collect(maps.Keys(p.former)), p.name)
	p.mu.Unlock()
	for _, name := range names {
		_ = p.purge(ctx, name)
	}
}

// purge removes the key of the store name and its subscriptions.
func (p *presence) purge(ctx context.Context, name string) error {
	if err := p.hubs.Purge(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	return p.purgeSubs(ctx, name)
}

// purgeSubs removes the subscriptions of the store name.
func (p *presence) purgeSubs(ctx context.Context, name string) error {
	st, err := p.s.js.Stream(ctx, "KV_"+p.s.name+"_subs")
	if err != nil {
		return err
	}
	return st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+p.s.name+"_subs."+name+".>"))
}

// missing tells whether err says that a bucket does not exist: the
// servers lost it, and the stores make it again.
func missing(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// Subscriptions returns the active subscriptions of every store on the
// stream, in no particular order: this store's from memory, the others'
// from the bucket, but those of stores that are no longer alive (see
// [WithSubscriptionTTL]), which it purges. It implements
// [store.SubscriptionStore].
func (s *Store) Subscriptions(ctx context.Context) ([]store.Subscription, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	p := &s.presence
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	// The subscriptions first, then the keys of the stores alive (see
	// the layout above). Missing buckets hold nothing: the stores write
	// theirs again.
	type entry struct {
		hub string
		rev uint64
		sub store.Subscription
	}
	var entries []entry
	w, err := p.subs.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil && !missing(err) {
		return nil, fmt.Errorf("natsstore: subscriptions: %w", err)
	}
	if err == nil {
		defer w.Stop()
		for done := false; !done; {
			select {
			case e := <-w.Updates():
				if e == nil {
					done = true
					break
				}
				hub, enc, ok := strings.Cut(e.Key(), ".")
				if !ok {
					continue
				}
				id, err := base64.RawURLEncoding.DecodeString(enc)
				if err != nil {
					continue
				}
				entries = append(entries, entry{hub, e.Revision(), store.Subscription{ID: string(id), Active: true, JSON: slices.Clone(e.Value())}})
			case <-ctx.Done():
				return nil, fmt.Errorf("natsstore: subscriptions: %w", ctx.Err())
			}
		}
	}
	alive := map[string]bool{}
	names, err := p.hubs.ListKeys(ctx)
	if err != nil && !missing(err) {
		return nil, fmt.Errorf("natsstore: subscriptions: %w", err)
	}
	if err == nil {
		for n := range names.Keys() {
			alive[n] = true
		}
		_ = names.Stop() // done: it reports the closed subscription
	}
	p.mu.Lock()
	own, former := p.name, maps.Clone(p.former)
	p.mu.Unlock()
	// A store that wrote its subscriptions again under a new name lists
	// each twice until it purged the former: the later write wins.
	latest := map[string]entry{}
	dead := map[string]bool{}
	for _, e := range entries {
		switch {
		case e.hub == own || former[e.hub]:
		case !alive[e.hub]:
			dead[e.hub] = true
		default:
			if l, ok := latest[e.sub.ID]; !ok || e.rev > l.rev {
				latest[e.sub.ID] = e
			}
		}
	}
	for hub := range dead {
		_ = p.purgeSubs(ctx, hub)
	}
	out := make([]store.Subscription, 0, len(latest))
	for _, e := range latest {
		out = append(out, e.sub)
	}
	p.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(p.local)) {
		out = append(out, store.Subscription{ID: id, Active: true, JSON: slices.Clone(p.local[id])})
	}
	p.mu.Unlock()
	return out, nil
}
