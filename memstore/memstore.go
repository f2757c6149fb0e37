// Package memstore is the default store of a mercure hub: the history of
// one hub, in memory (spec §Reconnection, State Reconciliation, and Event
// Sourcing). A hub without mercure.WithStore has one with the defaults;
// give it one of New's to keep more or fewer updates:
//
//	s, err := memstore.New(memstore.WithMaxEvents(10_000))
//	...
//	hub, err := mercure.New(hubURL, mercure.WithStore(s))
//
// Its history ends with its process; boltstore keeps one on disk, and
// redisstore and pgstore share one between several instances.
package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/memring"
	"github.com/mercurekit/mercure/store"
)

// Defaults of the options.
const (
	// DefaultMaxEvents is how many updates a store keeps by default.
	DefaultMaxEvents = memring.DefaultMaxEvents
	// DefaultMaxBytes bounds the memory a store's history takes by
	// default (see [WithMaxBytes]).
	DefaultMaxBytes = memring.DefaultMaxBytes
)

var _ store.Store = (*Store)(nil)

// Store is a ring buffer of the most recent updates. Its feed never fails.
// It is safe for concurrent use; the zero value is not usable: call [New].
type Store struct{ r *memring.Ring }

// An Option configures a [Store]. It validates its argument: a bad value
// makes [New] fail.
type Option func(*memring.Config) error

// WithMaxEvents sets how many updates the store keeps, at most; 0 keeps
// none (the store then only feeds live updates). The default is
// [DefaultMaxEvents].
func WithMaxEvents(n int) Option {
	return func(c *memring.Config) error {
		if n < 0 {
			return fmt.Errorf("%w: memstore.WithMaxEvents(%d) is negative", mercure.ErrInvalidOption, n)
		}
		c.MaxEvents = n
		return nil
	}
}

// WithMaxBytes bounds the memory that the store's history takes, as
// estimated from its updates' data, topics and encoding: the oldest
// updates are dropped to stay within n bytes, the latest one is always
// kept. 0 leaves the count of updates as the only bound. The default is
// [DefaultMaxBytes].
func WithMaxBytes(n int64) Option {
	return func(c *memring.Config) error {
		if n < 0 {
			return fmt.Errorf("%w: memstore.WithMaxBytes(%d) is negative", mercure.ErrInvalidOption, n)
		}
		c.MaxBytes = n
		return nil
	}
}

// WithRetryWindow sets how long after an update was recorded the same
// update appended again is taken for a retry and not recorded twice (see
// [store.Store]); 0 records every append. The default is
// [store.DefaultRetryWindow].
func WithRetryWindow(d time.Duration) Option {
	return func(c *memring.Config) error {
		if d < 0 {
			return fmt.Errorf("%w: memstore.WithRetryWindow(%v) is negative", mercure.ErrInvalidOption, d)
		}
		c.RetryWindow = d
		return nil
	}
}

// New returns an empty store configured by opts. It fails with an error
// wrapping mercure.ErrInvalidOption when an option is invalid.
func New(opts ...Option) (*Store, error) {
	c := memring.Config{MaxEvents: DefaultMaxEvents, MaxBytes: DefaultMaxBytes, RetryWindow: store.DefaultRetryWindow}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil memstore.Option", mercure.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	return &Store{memring.New(c)}, nil
}

// Append implements [store.Store]. Listeners run before it returns.
func (s *Store) Append(ctx context.Context, e *store.Event) error { return s.r.Append(ctx, e) }

// Replay implements [store.Store]. A replay reads the history a page at a
// time (512 updates, about 1 MiB): it holds no more of it than a page,
// even of updates dropped under it, and ends with an error wrapping
// [store.ErrHistoryGap] when the updates it has still to yield were
// dropped meanwhile.
func (s *Store) Replay(ctx context.Context, lastEventID string) (store.Backlog, error) {
	return s.r.Replay(ctx, lastEventID)
}

// Listen implements [store.Store].
func (s *Store) Listen(l store.Listener) (cancel func()) { return s.r.Listen(l) }
