package mercure

import "time"

// WithKeyRefreshLimit shortens, for tests, the interval between two
// on-demand fetches of an authorization server's keys (a minute by
// default).
func WithKeyRefreshLimit(d time.Duration) Option {
	return func(c *config) error {
		c.keyRefreshLimit = d
		return nil
	}
}

// PatternCompiles returns how many URL patterns the hub has compiled.
func (h *Hub) PatternCompiles() int { return h.patterns.Compiles() }

// DisablePoller makes a hub in low-memory mode, before its first stream,
// run as on systems without a poller: a goroutine reads each detached
// stream's connection, and unfinished writes are retried on a timer.
func (h *Hub) DisablePoller() {
	h.lm.mu.Lock()
	defer h.lm.mu.Unlock()
	h.lm.noPoll = true
}
