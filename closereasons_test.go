//go:build unix

package mercure_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Close reasons say what happened, in both stream engines (issue 24 item
// 6: a write timeout was counted as client_gone in the default mode). A
// reader that never reads is cut by the write timeout and counted as
// write_error; a reader that hangs up is counted as client_gone.
func TestCloseReasons_WriteTimeoutIsNotClientGone(t *testing.T) {
	t.Parallel()
	for name, engine := range map[string]mercure.Option{
		"detached":  mercure.WithDetachedStreams(),
		"goroutine": mercure.WithGoroutineStreams(),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			th := newTestHub(t, engine, mercure.WithLimits(mercure.Limits{WriteTimeout: 200 * time.Millisecond}),
				mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}), bigLimits)
			stalledStreams(t, th, "match=x", 1) // never read, small receive buffer
			publishUntilCut(t, th, "x", strings.Repeat("y", 256<<10), 0)
			// The stream is counted as closed once it is gone from Metrics.
			testwait.For(t, "the stream counted as closed", func() bool {
				m := th.Metrics()
				var n uint64
				for _, c := range m.StreamsClosed {
					n += c
				}
				return n == 1
			})
			m := th.Metrics()
			if m.StreamsClosed[mercure.CloseWriteError] != 1 || m.StreamsClosed[mercure.CloseClientGone] != 0 {
				t.Fatalf("closed %v, want one write_error and no client_gone", m.StreamsClosed)
			}
			if st := th.Metrics(); st.Overflows != 0 {
				t.Fatalf("stats %+v, want the write timeout, not an overflow", st)
			}

			// A reader that hangs up is client_gone.
			s := th.subscribe("match=x")
			testwait.For(t, "the stream open", func() bool { return th.Metrics().Streams == 1 })
			s.close()
			testwait.For(t, "the leaver counted", func() bool { return th.Metrics().StreamsClosed[mercure.CloseClientGone] == 1 })
			if got := th.Metrics().StreamsClosed[mercure.CloseWriteError]; got != 1 {
				t.Fatalf("write_error %d after a client left, want 1", got)
			}
		})
	}
}
