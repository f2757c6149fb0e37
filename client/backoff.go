package client

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// delay is how long to wait before the next connection, after failures
// consecutive connections that delivered nothing, the last ending with
// err. The hub sets the base with its retry field and may ask for more
// with Retry-After, but only within [MinReconnectDelay, MaxHubDelay]
// (jitter included): a hub cannot make the client hammer it, nor park it
// for days.
func (st *stream) delay(failures int, err error) time.Duration {
	c := st.c
	floor, hubMax := c.minReconnectDelay(), max(c.maxHubDelay(), c.minReconnectDelay())
	base := c.ReconnectDelay
	if base <= 0 {
		base = DefaultReconnectDelay
	}
	if st.retry != nil {
		base = min(*st.retry, hubMax)
	}
	base = max(base, floor)
	ceiling := c.MaxReconnectDelay
	if ceiling <= 0 {
		ceiling = DefaultMaxReconnectDelay
	}
	ceiling = max(ceiling, base)
	d := base
	for range min(failures, 32) {
		if d >= ceiling/2 {
			d = ceiling
			break
		}
		d *= 2
	}
	var se *StatusError
	if errors.As(err, &se) {
		d = max(d, min(se.RetryAfter, hubMax))
	}
	// Jitter, so that clients that a restart or a Retry-After sent away
	// together come back spread: added, so that a delay is never shorter
	// than asked, unless the hub asked for MaxHubDelay or more. Then it
	// is taken off: the cap holds (the hub gets less than it asked
	// anyway).
	asked := st.retry != nil && *st.retry >= hubMax || se != nil && se.RetryAfter >= hubMax
	if asked && d <= hubMax {
		return d - rand.N(d/4+1)
	}
	if j := rand.N(d/2 + 1); d <= math.MaxInt64-j {
		d += j
	}
	return d
}

func (c *Client) minReconnectDelay() time.Duration {
	if c.MinReconnectDelay == 0 {
		return DefaultMinReconnectDelay
	}
	return max(c.MinReconnectDelay, time.Millisecond)
}

func (c *Client) maxHubDelay() time.Duration {
	if c.MaxHubDelay <= 0 {
		return DefaultMaxHubDelay
	}
	return c.MaxHubDelay
}

// parseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3):
// delay-seconds, or an HTTP-date. A delay longer than a time.Duration
// holds saturates instead of wrapping around.
func parseRetryAfter(s string, now time.Time) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s != "" && strings.Trim(s, "0123456789") == "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n > math.MaxInt64/uint64(time.Second) { // digits only: a range error
			return math.MaxInt64, true
		}
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(s); err == nil {
		return max(0, t.Sub(now)), true // Sub saturates too
	}
	return 0, false
}
