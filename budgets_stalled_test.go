//go:build unix

package mercure_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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

// The reproduction of issue 41 item 1 at its scale: readers that never
// read (small receive buffers, as above) and three that keep up, then a
// burst of large updates published as fast as the hub accepts them (four
// publishers, none waiting for the readers), with the default queues
// (1 024 events, 8 MiB): 400 stalled readers and 120 updates of 256 KiB,
// then 200 and 60 of 1 MiB. The burst fills every stream's queue past its
// bound before the writers have been round to all of them; the hub used
// to end the healthy streams with the stalled ones for it (they got none
// of the updates, or a few). Now a queue past its bound ends its stream
// only when its own connection holds it back: every healthy reader gets
// every update, in both stream engines, and stays connected. The burst
// (30 and 60 MB, under the queues' 128 MiB budget) ends well within the
// stall grace (a quarter of a long write timeout, as above), so nothing
// waits for it, and the stalled streams stay open until their clients
// close. The server's send buffers are the kernel's: each healthy reader
// takes 30 to 60 MB, and with 32 KiB (less than one segment on loopback,
// whose MSS is about 64 KiB) each buffer's worth waited for the reader's
// delayed ACK, and the readers got about 1.6 MB/s (37 s for the second
// burst). The stalled sockets take a few tens of KiB each before they
// block: the test took about 3 s, 3 s of CPU (most of it the kernel's
// copies) and 180 MB at its peak, beside other runs (load average 9).
func TestBudgets_HealthyBesideStalledReadersInABurst(t *testing.T) {
	if testing.Short() {
		t.Skip("600 connections, 90 MB published")
	}
	if os.Getenv("MERCURE_TEST_GOROUTINE_STREAMS") == "1" {
		t.Skip("runs both engines itself: once per CI run is enough")
	}
	// Its own process, as the test above: the connections and the
	// burst's bytes, without the parallel tests' load on its process.
	if !alone.InProcess(t) {
		return
	}
	// One after the other: each hub and its connections end before the
	// next one's start, and the process holds one burst at a time (the
	// stalled queues pin it: 30 or 60 MB, and the heap grows to about
	// twice that between collections). The history keeps one update.
	streamModes(t, func(t *testing.T, opts ...mercure.Option) {
		for _, c := range []struct{ stalled, updates, size int }{{400, 120, 256 << 10}, {200, 60, 1 << 20}} {
			t.Run(fmt.Sprintf("%d×%dKiB", c.updates, c.size>>10), func(t *testing.T) {
				th := startHub(t, nil, append(opts, withHistory(t, 1), mercure.WithInsecurePublishing(), mercure.WithLimits(mercure.Limits{
					MaxBodyBytes: 2 << 20, MaxConnections: 1000,
				}), mercure.WithLimits(mercure.Limits{WriteTimeout: 20 * time.Second}), mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}))...)
				stalled := stalledStreams(t, th, "match=x", c.stalled)
				const healthy = 3
				got := burst(t, th, healthy, 4, c.updates, c.size)
				for i, n := range got {
					if n != c.updates {
						t.Errorf("%d stalled readers, %d updates of %d KiB: healthy reader %d got %d", c.stalled, c.updates, c.size>>10, i, n)
					}
				}
				m := th.Metrics()
				t.Logf("%d stalled readers, %d updates of %d KiB: healthy readers got %v; %d open, %d overflows, closed %v",
					c.stalled, c.updates, c.size>>10, got, m.Streams, m.Overflows, m.StreamsClosed)
				// Only stalled streams may have ended (none should, the
				// burst ending within their stall grace).
				if m.Streams < healthy || m.Overflows > uint64(len(stalled)) {
					t.Errorf("%d streams open, %d overflows: want the healthy ones open, only stalled ones cut", m.Streams, m.Overflows)
				}
			})
		}
	})
}

// burst opens n streams of "match=x" on th that read all they get,
// publishes updates of size bytes to x from publishers side by side, each
// as soon as its previous one is accepted, and returns how many updates
// each reader got: all of them, unless its stream ended.
func burst(t *testing.T, th *testHub, n, publishers, updates, size int) []int {
	t.Helper()
	got := make([]int, n)
	var readers sync.WaitGroup
	for i := range n {
		res := openUntilCleanup(t, th, "match=x")
		readers.Add(1)
		go func() {
			// Counts "\ndata:" however the reads split it, without
			// keeping the updates' lines. Once the last update's line
			// shows, the reader is done, but reads on until the stream
			// ends: the rest of that update is still coming, and a
			// healthy reader that stopped there would have its stream
			// cut by the write timeout while the others finish.
			counting := true
			defer func() {
				if counting {
					readers.Done()
				}
			}()
			buf := make([]byte, 64<<10)
			var tail []byte
			for {
				k, err := res.Body.Read(buf)
				if counting {
					b := append(tail, buf[:k]...)
					got[i] += bytes.Count(b, []byte("\ndata:"))
					tail = append(tail[:0], b[max(0, len(b)-5):]...)
					if got[i] >= updates {
						counting = false
						readers.Done()
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	data := strings.Repeat("d", size)
	var next atomic.Int64
	var pubs sync.WaitGroup
	for range publishers {
		pubs.Go(func() {
			for next.Add(1) <= int64(updates) {
				if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	pubs.Wait()
	readers.Wait()
	return got
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
