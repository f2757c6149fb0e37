package mercure_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Issue 41's reproduction: 300 subscribers open at once under heavy
// publishing, each stream's queue holding two updates. Every subscriber
// gets a status line: a stream (200), or, where its queue filled before
// its headers were sent, a refusal (503 with Retry-After); never EOF
// before the status line. StreamsOpened counts the streams that started
// (the 200s), and once they are all closed, StreamsClosed counts each of
// them. (A deterministic reproduction: TestStreamThatCannotStartIsRefused.)
func TestStreamsOpenedCountsOnlyStreamsThatStarted(t *testing.T) {
	t.Parallel()
	streamModesParallel(t, func(t *testing.T, opts ...mercure.Option) {
		th := newTestHub(t, append(opts, mercure.WithLimits(mercure.Limits{QueueEvents: 2, MaxBodyBytes: 1 << 10, MaxConnections: 1000}))...)
		ctx, cancel := context.WithCancel(context.Background())
		var pubs sync.WaitGroup
		defer pubs.Wait()
		defer cancel()
		for range 8 {
			pubs.Go(func() {
				for ctx.Err() == nil {
					th.Publish(ctx, mercure.Update{Topics: []string{"x"}, Data: "d"})
				}
			})
		}
		const n = 300
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				conn, err := net.Dial("tcp", th.srv.Listener.Addr().String())
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				fmt.Fprintf(conn, "GET %s?match=x HTTP/1.1\r\nHost: example.com\r\n\r\n", th.Path())
				res, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Errorf("subscriber %d: no status line: %v", i, err)
					return
				}
				if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") == "" {
					t.Errorf("subscriber %d: 503 without Retry-After", i)
				}
				statuses[i] = res.StatusCode
			})
		}
		wg.Wait()
		cancel()
		pubs.Wait()
		started := 0
		for _, s := range statuses {
			switch s {
			case http.StatusOK:
				started++
			case http.StatusServiceUnavailable, 0: // 0: failed above
			default:
				t.Errorf("status %d, want 200 or 503", s)
			}
		}
		var m mercure.Metrics
		var closed uint64
		if !testwait.Within(testwait.Deadline, func() bool {
			m, closed = th.Metrics(), 0
			for _, c := range m.StreamsClosed {
				closed += c
			}
			return m.Streams == 0 && closed == m.StreamsOpened
		}) {
			t.Fatalf("%d open, opened %d, closed %v: want every stream closed and counted", m.Streams, m.StreamsOpened, m.StreamsClosed)
		}
		if m.StreamsOpened != uint64(started) {
			t.Fatalf("StreamsOpened %d, want the %d subscribers that got a stream (%d refused)", m.StreamsOpened, started, n-started)
		}
		t.Logf("%d streams started, %d refused; closed %v", started, n-started, m.StreamsClosed)
	})
}
