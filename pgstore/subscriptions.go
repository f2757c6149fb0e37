package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/mercurekit/mercure/store"
)

// DefaultSubscriptionTTL is how long the subscriptions of a store that
// stopped refreshing them (its process died) stay listed (see
// [WithSubscriptionTTL]).
const DefaultSubscriptionTTL = 15 * time.Second

// WithSubscriptionTTL sets how long the subscriptions shared by a store
// outlive it when its process dies without [Store.Close]: the store
// refreshes them every third of d. The default is
// [DefaultSubscriptionTTL].
func WithSubscriptionTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < 3*time.Millisecond {
			return invalid("subscription TTL %v is shorter than 3ms", d)
		}
		c.subTTL = d
		return nil
	}
}

// Layout of the shared subscriptions: prefix+"_hubs" has a row per store
// sharing some, with the time it expires unless the store refreshes it;
// prefix+"_subs" holds each store's subscriptions as JSON. Listing joins
// them on the stores not expired, and writes nothing; each store's feed
// deletes the rows of expired stores (100 at a time) once per TTL.

// presence shares a store's active subscriptions. Writes are serialised,
// so that they reach the database in the order of the calls; the store
// keeps its own set in memory and rewrites it whenever a write failed or
// the database lost its row.
type presence struct {
	s    *Store
	name uuid.UUID // this store's row in the hubs table

	wmu     sync.Mutex // serialises writes
	mu      sync.Mutex
	local   map[string][]byte // id → JSON of this store's active subscriptions
	resync  bool              // rewrite the whole set at the next write
	started bool              // the refresher runs
	wake    chan struct{}     // the refresher writes at once
}

func (p *presence) init(s *Store) {
	p.s = s
	p.name = uuid.New()
	p.local = make(map[string][]byte)
	p.wake = make(chan struct{}, 1)
}

// reconnected has the refresher rewrite the store's whole set at once,
// if it shares one: the feed connected again, maybe to another server, a
// standby promoted that lacks the latest writes. The refresher alone
// rewrites the set when the store's row is gone, and the row may have
// reached the standby before the writes it lacks.
func (p *presence) reconnected() {
	p.mu.Lock()
	p.resync = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// UpdateSubscriptions records changes of the subscriptions of the hub
// using the store: an active one is added (or replaced), an inactive one
// removed. It implements [store.SubscriptionStore]: it returns once the
// database has the changes, or with the error of that write; the store
// keeps them in any case and writes them when it can, and keeps them
// visible to every store on the tables while this one lives (see
// [WithSubscriptionTTL]).
func (s *Store) UpdateSubscriptions(ctx context.Context, subs []store.Subscription) error {
	p := &s.presence
	p.mu.Lock()
	if s.closed() {
		p.mu.Unlock()
		return ErrClosed
	}
	var set []any
	var del []string
	for _, sub := range subs {
		if sub.Active {
			p.local[sub.ID] = slices.Clone(sub.JSON)
			set = append(set, sub.ID, string(sub.JSON))
		} else {
			delete(p.local, sub.ID)
			del = append(del, sub.ID)
		}
	}
	if !p.started {
		p.started = true
		s.wg.Add(1)
		go p.refresher()
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if err := p.write(ctx, set, del); err != nil {
		return fmt.Errorf("pgstore: sharing subscriptions: %w", err)
	}
	return nil
}

// write applies changes (id, JSON pairs in set; ids in del), or the
// whole local set when a resync is due, and refreshes the store's row.
func (p *presence) write(ctx context.Context, set []any, del []string) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	n := p.s.n
	p.mu.Lock()
	resync := p.resync
	if resync {
		set, del = nil, nil
		for id, b := range p.local {
			set = append(set, id, string(b))
		}
	}
	p.resync = false
	p.mu.Unlock()
	err := pgx.BeginTxFunc(ctx, p.s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var inserted bool
		// xmax = 0: the row was inserted, not updated: it had expired
		// and been deleted, and the subscriptions with it.
		err := tx.QueryRow(ctx, `INSERT INTO `+n.hubs+` (hub, expires) VALUES ($1, now() + make_interval(secs => $2))
			ON CONFLICT (hub) DO UPDATE SET expires = excluded.expires RETURNING xmax = 0`,
			p.name, p.s.cfg.subTTL.Seconds()).Scan(&inserted)
		if err != nil {
			return err
		}
		if inserted && !resync {
			// Write the whole set, of which the changes are part.
			p.mu.Lock()
			set, del = nil, nil
			for id, b := range p.local {
				set = append(set, id, string(b))
			}
			p.mu.Unlock()
			resync = true
		}
		b := &pgx.Batch{}
		if resync {
			b.Queue(`DELETE FROM `+n.subs+` WHERE hub = $1`, p.name)
		}
		for i := 0; i < len(set); i += 2 {
			b.Queue(`INSERT INTO `+n.subs+` (hub, id, doc) VALUES ($1, $2, $3)
				ON CONFLICT (hub, id) DO UPDATE SET doc = excluded.doc`, p.name, set[i], set[i+1])
		}
		if len(del) > 0 {
			b.Queue(`DELETE FROM `+n.subs+` WHERE hub = $1 AND id = any($2)`, p.name, del)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		p.mu.Lock()
		p.resync = true
		p.mu.Unlock()
	}
	return err
}

// Subscriptions returns the active subscriptions of every store on the
// tables, in no particular order. It implements
// [store.SubscriptionStore].
func (s *Store) Subscriptions(ctx context.Context) ([]store.Subscription, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	n := s.n
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	var subs []store.Subscription
	err := s.query(ctx, n.subsList, []any{s.presence.name}, func(rows pgx.Rows) error {
		var err error
		subs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Subscription, error) {
			sub := store.Subscription{Active: true}
			err := row.Scan(&sub.ID, &sub.JSON)
			return sub, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: listing subscriptions: %w", err)
	}
	p := &s.presence
	p.mu.Lock()
	for id, doc := range p.local {
		subs = append(subs, store.Subscription{ID: id, Active: true, JSON: doc})
	}
	p.mu.Unlock()
	return subs, nil
}

// refresher refreshes the store's row every third of the TTL, and when
// the feed connected again, rewriting the set after a failure or a
// reconnection, until the store closes.
func (p *presence) refresher() {
	defer p.s.wg.Done()
	ttl := p.s.cfg.subTTL
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	// A failed write is tried again soon, not at the next tick: after a
	// failover, the pool may hand out one dead connection after
	// another, each costing a tick (a rewrite of the set after a
	// failover once took more than 30 s so, beside two CPU hogs).
	const first = 50 * time.Millisecond
	backoff := first
	var retry <-chan time.Time
	for {
		select {
		case <-t.C:
		case <-p.wake:
		case <-retry:
		case <-p.s.ctx.Done():
			return
		}
		retry = nil
		ctx, cancel := context.WithTimeout(p.s.ctx, p.s.cfg.timeout)
		err := p.write(ctx, nil, nil) // a failure sets resync
		cancel()
		if err != nil {
			retry = time.After(backoff)
			backoff = min(2*backoff, time.Second)
		} else {
			backoff = first
		}
	}
}

// withdraw removes this store's subscriptions, once the refresher has
// stopped. Best effort: they expire anyway.
func (p *presence) withdraw() {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if !started {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.s.cfg.timeout)
	defer cancel()
	n := p.s.n
	pgx.BeginTxFunc(ctx, p.s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM `+n.subs+` WHERE hub = $1`, p.name); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM `+n.hubs+` WHERE hub = $1`, p.name)
		return err
	})
}

// sweep deletes the rows of the stores whose subscriptions expired, at
// most once per TTL, on the feed's connection: listing them writes
// nothing.
func (s *Store) sweep(conn *pgx.Conn, swept *time.Time) error {
	if time.Since(*swept) < s.cfg.subTTL {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	if _, err := conn.Exec(ctx, s.n.subsSweep, sweepBatch); err != nil {
		return err
	}
	*swept = time.Now()
	return nil
}
