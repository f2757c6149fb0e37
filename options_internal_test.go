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
	case got.MaxAnonymousConnections != 100:
		t.Fatalf("MaxAnonymousConnections %d, want half the final MaxConnections", got.MaxAnonymousConnections)
	case got.QueueBytes != 16<<20:
		t.Fatalf("QueueBytes %d, want MaxBodyBytes (a queue holds one update)", got.QueueBytes)
	case got.WriteTimeout != defaultLimits.WriteTimeout:
		t.Fatalf("WriteTimeout %v, want the default", got.WriteTimeout)
	}
}
