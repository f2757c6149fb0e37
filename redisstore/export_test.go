package redisstore

import "time"

// ReplayPage is how many entries Replay reads at once, past the one it
// starts from.
const ReplayPage = replayPage

// MaxLen returns the retention the store was opened with.
func (s *Store) MaxLen() int64 { return s.cfg.maxLen }

// WithPresenceBackoff sets the subscriptions writer's first wait after a
// failed write (minBackoff otherwise): a test makes it long, so that only
// what is meant to cut it short (a new change) can.
func WithPresenceBackoff(d time.Duration) Option {
	return func(c *config) error {
		c.presenceBackoff = d
		return nil
	}
}

// PageBytes is about how many bytes of fields a page of Replay holds.
const PageBytes = pageBytes
