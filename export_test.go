package mercure

import (
	"time"

	"github.com/mercurekit/mercure/internal/memring"
	"github.com/mercurekit/mercure/store"
)

// WithKeyRefreshLimit shortens, for tests, the interval between two
// on-demand fetches of an authorization server's keys (a minute by
// default).
func WithKeyRefreshLimit(d time.Duration) Option {
	return func(c *config) error {
		c.keyRefreshLimit = d
		return nil
	}
}

// WithInterestLinger sets, for tests, how long a store.InterestStore
// keeps reading a topic that no stream needs any more.
func WithInterestLinger(d time.Duration) Option {
	return func(c *config) error {
		c.interestLinger = d
		return nil
	}
}

// PatternCompiles returns how many URL patterns the hub has compiled.
func (h *Hub) PatternCompiles() int { return h.auth.patterns.Compiles() }

// WithoutPoller makes a hub's detached streams run as on systems without
// a poller: a goroutine reads each detached stream's connection, and
// unfinished writes are retried on a timer.
func WithoutPoller() Option {
	return func(c *config) error {
		c.noPoller = true
		return nil
	}
}

// WithStallGrace sets how long a stream's connection may take nothing
// of what it is sent before the stream counts as stalled (a quarter of
// Limits.WriteTimeout by default): past its queue's bound, or past the
// queues' budget, it then ends for overflow. Tests of overflows use a
// short grace with a long write timeout, so that a stalled stream
// overflows long before its write times out.
func WithStallGrace(d time.Duration) Option {
	return func(c *config) error {
		c.stallGrace = d
		return nil
	}
}

// WithDetachedStreams takes HTTP/1.1 streams over after their headers,
// whatever the default: the tests of detached streams use it.
func WithDetachedStreams() Option {
	return func(c *config) error {
		c.goroutineStreams = false
		return nil
	}
}

// WithdrawingSubscriptions counts the ended subscriptions whose end the
// hub has yet to share with its store.SubscriptionStore.
func (h *Hub) WithdrawingSubscriptions() int {
	h.presence.mu.Lock()
	defer h.presence.mu.Unlock()
	return len(h.presence.withdrawing)
}

// newRing returns a memory store of the hub's default kind keeping size
// events, for the package's internal tests (package memstore imports
// this one).
func newRing(size int) *memring.Ring {
	return memring.New(memring.Config{MaxEvents: size, RetryWindow: store.DefaultRetryWindow})
}
