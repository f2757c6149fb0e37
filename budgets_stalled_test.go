//go:build unix

package mercure_test

import (
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/alone"
	"github.com/mercurekit/mercure/internal/testwait"
)

// The reproduction of issue 24 item 2 at its scale, for its "done when":
// 2 000 readers that never read (real sockets with small buffers at both
// ends, on which the hub's writes soon block: with the kernel's default
// send buffers, copying megabytes into them took half the test's CPU time)
// and 20 that keep up.
// Each stream's own queue holds more than the whole run publishes (500
// updates of 8 KiB to each), so only the hub-wide budget (16 MiB, spent
// at once by 2 000 stalled queues) or the write timeout can cut anyone:
// the stalled readers pay (they are shed, counted as queue_overflow, or
// cut by the timeout), and every healthy reader gets every update and
// stays connected, in both stream engines. The write timeout is long: on
// a machine starved by other work, a healthy reader can go seconds
// without reading, and a write timeout cuts it as it should (once, with
// 8 s, a healthy reader was cut so beside two CPU hogs and three other
// test runs, when this test shared its process with the package's other
// tests). The stall grace is a quarter of it, 5 s: the publishers wait
// that long for the stalled streams to be shed, and the test takes about
// that long plus 2 s. In a process of its own (as now), a stall grace of
// 1 s passed beside three CPU hogs and the package's other tests, under
// the race detector too.
func TestBudgets_HealthyBeside2000StalledReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("2 000 connections")
	}
	if os.Getenv("MERCURE_TEST_GOROUTINE_STREAMS") == "1" {
		t.Skip("runs both engines itself: once per CI run is enough")
	}
	// The package's run waits for this test's stall grace: it starts
	// first, and opens its 2 000 streams without the parallel tests'
	// load on its process.
	if !alone.InProcess(t) {
		return
	}
	streamModesParallel(t, func(t *testing.T, opts ...mercure.Option) {
		th := startHub(t, smallSendBuffers, append(opts, mercure.WithInsecurePublishing(), mercure.WithLimits(mercure.Limits{
			MaxBodyBytes: 64 << 10, QueueEvents: 1 << 20, QueueBytes: 16 << 20, MaxQueuedBytes: 16 << 20,
			MaxConnections: 3000,
		}), mercure.WithLimits(mercure.Limits{WriteTimeout: 20 * time.Second}), mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}))...)
		const nStalled = 2000
		stalled := stalledStreams(t, th, "match=x", nStalled)
		const healthy, rounds, perRound = 20, 10, 50
		got := healthyReaders(t, th, healthy, rounds, perRound, 8<<10)
		for i, n := range got {
			if n != rounds*perRound {
				t.Errorf("healthy reader %d got %d updates of %d", i, n, rounds*perRound)
			}
		}
		// Every stream that ended is a stalled one, cut for the queues'
		// budget or, where its write timed out first (a slow run), for
		// that: never for the client leaving, never a healthy one.
		var m mercure.Metrics
		var open int
		var closed uint64
		settled := func() bool {
			m, open, closed = th.Metrics(), th.Metrics().Streams, 0
			for _, n := range m.StreamsClosed {
				closed += n
			}
			// No stream can overflow its own queue here: every overflow
			// is a stream shed for the budget, counted once, and closed
			// for it (not one that its write timeout was ending already).
			return uint64(open)+closed == uint64(len(stalled)+healthy) && m.Overflows == m.StreamsClosed[mercure.CloseQueueOverflow]
		}
		if !testwait.Within(testwait.Deadline, settled) {
			t.Fatalf("%d open, %d overflows, closed %v: want every stream open or closed, each overflow closed once for it", open, m.Overflows, m.StreamsClosed)
		}
		t.Logf("%d open, %d overflows, closed %v", open, m.Overflows, m.StreamsClosed)
		if paid := m.StreamsClosed[mercure.CloseQueueOverflow] + m.StreamsClosed[mercure.CloseWriteError]; paid != closed || open < healthy {
			t.Errorf("%d streams open and closed %v: want the %d healthy ones open, and only stalled ones cut", open, m.StreamsClosed, healthy)
		}
	})
}

// smallSendBuffers gives the server's connections a send buffer of 32 KiB:
// a stalled reader's socket takes that much of the hub's writes before
// they block, not the megabytes the kernel's autotuning would allow.
func smallSendBuffers(srv *http.Server) {
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if tc, ok := c.(*net.TCPConn); ok && s == http.StateNew {
			tc.SetWriteBuffer(32 << 10)
		}
	}
}
