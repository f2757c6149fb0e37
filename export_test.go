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
