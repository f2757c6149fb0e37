package mercure

import (
	"testing"
	"time"
)

// WithLimits options compose: each sets only its non-zero fields, the
// later ones win, and the limits that follow others by default follow the
// final values.
func TestWithLimits_Composes(t *testing.T) {
	t.Parallel()
	h := newInternalHub(t,
		WithLimits(Limits{MaxConnections: 100, MaxAnonymousConnectionsPerClient: 7}),
		WithLimits(Limits{KeepAlive: time.Second, MaxBodyBytes: 16 << 20}),
		WithLimits(Limits{MaxConnections: 200}),
	)
	got := h.cfg.limits
	switch {
	case got.MaxConnections != 200, got.MaxAnonymousConnectionsPerClient != 7, got.KeepAlive != time.Second:
		t.Fatalf("limits set by three options: %+v", got)
	case got.MaxAnonymousConnections != 180:
		t.Fatalf("MaxAnonymousConnections %d, want nine tenths of the final MaxConnections", got.MaxAnonymousConnections)
	case got.QueueBytes != 16<<20:
		t.Fatalf("QueueBytes %d, want MaxBodyBytes (a queue holds one update)", got.QueueBytes)
	case got.WriteTimeout != defaultLimits.WriteTimeout:
		t.Fatalf("WriteTimeout %v, want the default", got.WriteTimeout)
	}
}

// The anonymous share leaves token and session holders a tenth of the
// connections, not half (issue 41: a public hub with a token for its
// publishers refused its 5 001st reader of 10 000), and at least one
// connection each way where there are two.
func TestDefaultAnonymousShare(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ max, want int }{{10_000, 9_000}, {100, 90}, {15, 14}, {2, 1}, {1, 1}} {
		if got := (Limits{MaxConnections: c.max}).resolve().MaxAnonymousConnections; got != c.want {
			t.Errorf("MaxConnections %d: anonymous share %d, want %d", c.max, got, c.want)
		}
	}
	if got := (Limits{}).resolve(); got.MaxAnonymousConnections != 9_000 || defaultLimits.MaxAnonymousConnections != 9_000 {
		t.Errorf("default anonymous share %d (defaultLimits %d), want 9 000 of 10 000", got.MaxAnonymousConnections, defaultLimits.MaxAnonymousConnections)
	}
	if got := (Limits{MaxConnections: 100, MaxAnonymousConnections: 100}).resolve().MaxAnonymousConnections; got != 100 {
		t.Errorf("a share set: %d, want it kept", got)
	}
}
