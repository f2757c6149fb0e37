//go:build unix

package mercure_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/alone"
	"github.com/mercurekit/mercure/internal/testwait"
)

// stalledStreams opens n streams of query whose clients read the response
// headers, then never read again, with a small receive buffer: the hub's
// writes to them soon find their connections full. The buffer is set
// before the connection is: shrinking it later makes loopback drop
// segments, and the hub's last bytes then take many seconds to arrive
// once the client reads again.
func stalledStreams(t *testing.T, th *testHub, query string, n int) []*rawStream {
	t.Helper()
	return stalledStreamsOver(t, th, query, n, nil)
}

// stalledStreamsOver is stalledStreams, over TLS when tlsConf is not nil.
func stalledStreamsOver(t *testing.T, th *testHub, query string, n int, tlsConf *tls.Config) []*rawStream {
	t.Helper()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	// Every request is sent before the first response is read: the hub
	// answers them side by side, and a busy machine does not make the
	// test wait for n round trips one after the other.
	streams := make([]*rawStream, n)
	for i := range streams {
		conn, err := dialer.Dial("tcp", th.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if tlsConf != nil {
			conn = tls.Client(conn, tlsConf)
		}
		t.Cleanup(func() { conn.Close() })
		streams[i] = &rawStream{conn: conn, br: bufio.NewReaderSize(conn, 512)}
		if _, err := fmt.Fprintf(conn, "GET %s?%s HTTP/1.1\r\nHost: example.com\r\n\r\n", th.Path(), query); err != nil {
			t.Fatal(err)
		}
	}
	for _, rs := range streams {
		res, err := http.ReadResponse(rs.br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	return streams
}

// stalledCount is how many stalled clients the tests open: more than a
// hub's writers.
var stalledCount = max(16, 4*runtime.GOMAXPROCS(0)) + 8

// bigLimits lets stalled streams queue a lot: they must be stuck on their
// writes, not kicked for overflowing.
var bigLimits = mercure.WithLimits(mercure.Limits{QueueEvents: 1 << 20, QueueBytes: 1 << 30, MaxQueuedBytes: 1 << 31})

// More clients than there are writers stop reading at once: a healthy
// subscriber still gets every update while their writes are stuck, long
// before their write timeout would free a writer.
func TestDetached_StalledClientsCostOnlyTheirStreams(t *testing.T) {
	t.Parallel()
	for _, poller := range []bool{true, false} {
		t.Run(fmt.Sprint("poller=", poller), func(t *testing.T) {
			t.Parallel()
			opts := []mercure.Option{mercure.WithLimits(mercure.Limits{WriteTimeout: time.Minute}), mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}), bigLimits}
			if !poller {
				opts = append(opts, mercure.WithoutPoller()) // unfinished writes are retried on a timer
			}
			th := newDetachedHub(t, opts...)
			testStalledClients(t, th)
		})
	}
}

func testStalledClients(t *testing.T, th *testHub) {
	stalled := stalledStreams(t, th, "match=x", stalledCount)
	healthy := dialStream(t, th, "match=x")
	data := strings.Repeat("y", 256<<10)
	const updates = 40

	// The healthy subscriber reads everything, within a deadline that a
	// writer stuck for the write timeout would exceed.
	got := make(chan error, 1)
	go func() {
		healthy.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		n := 0
		for n < updates {
			line, err := healthy.br.ReadString('\n')
			if err != nil {
				got <- fmt.Errorf("after %d updates: %w", n, err)
				return
			}
			if strings.HasPrefix(line, "id: ") {
				n++
			}
		}
		got <- nil
	}()
	for i := range updates {
		if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data, ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("the healthy subscriber did not get every update: %v", err)
	}
	// The stalled streams are stuck, not gone.
	if st := th.Metrics(); st.Streams != len(stalled)+1 || st.Overflows != 0 {
		t.Fatalf("stats %+v, want %d streams, no overflow", st, len(stalled)+1)
	}
}

// Stalled streams are cut once their writes have made no progress for
// the write timeout, without an overflow; a healthy one goes on. The
// timeout is 5 s: beside the parallel tests, the healthy reader can be
// descheduled for a while.
func TestDetached_StalledClientsAreCut(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits 5 s for the stalled sockets to be cut")
	}
	// It starts first, in a process of its own, rather than waiting out
	// its 5 s behind the package's parallel tests.
	if !alone.InProcess(t) {
		return
	}
	th := newDetachedHub(t, mercure.WithLimits(mercure.Limits{WriteTimeout: 5 * time.Second}), mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}), bigLimits)
	stalled := stalledStreams(t, th, "match=x", stalledCount)
	healthy := dialStream(t, th, "match=x")
	var reading sync.WaitGroup
	defer reading.Wait()
	reading.Go(func() {
		healthy.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, _ = io.Copy(io.Discard, healthy.br)
	})
	defer healthy.conn.Close()
	publishUntilCut(t, th, "x", strings.Repeat("y", 256<<10), 1)
	if st := th.Metrics(); st.Overflows != 0 || st.Streams != 1 {
		t.Fatalf("stats %+v, want the healthy stream open and no overflow", st)
	}
	if got := th.Metrics().StreamsClosed[mercure.CloseWriteError]; got != uint64(len(stalled)) {
		t.Fatalf("%d streams closed for a write error, want the %d stalled ones", got, len(stalled))
	}
	// Each stalled connection was closed: read to its end.
	cut := 0
	deadline := time.Now().Add(testwait.Deadline)
	for _, rs := range stalled {
		rs.conn.SetReadDeadline(deadline)
		_, err := io.Copy(io.Discard, rs.br)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			continue
		}
		cut++
	}
	if cut != len(stalled) {
		t.Fatalf("%d of %d stalled connections cut", cut, len(stalled))
	}
}

// Over TLS, where a write cannot be tried without blocking, stalled
// clients cost only their streams too: each stuck write holds a goroutine
// of its own, not a writer.
func TestDetached_StalledTLSClientsCostOnlyTheirStreams(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(), mercure.WithDetachedStreams(),
		mercure.WithLimits(mercure.Limits{WriteTimeout: time.Minute}), mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}), bigLimits)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h) // no HTTP/2
	th := &testHub{Hub: h, srv: srv, t: t}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		srv.Close()
	})
	conf := &tls.Config{InsecureSkipVerify: true}
	stalled := stalledStreamsOver(t, th, "match=x", stalledCount, conf)
	healthy := stalledStreamsOver(t, th, "match=x", 1, conf)[0] // read, though
	data := strings.Repeat("y", 256<<10)
	const updates = 40
	got := make(chan error, 1)
	go func() {
		healthy.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		n := 0
		for n < updates {
			line, err := healthy.br.ReadString('\n')
			if err != nil {
				got <- fmt.Errorf("after %d updates: %w", n, err)
				return
			}
			if strings.HasPrefix(line, "id: ") {
				n++
			}
		}
		got <- nil
	}()
	for i := range updates {
		if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data, ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("the healthy subscriber did not get every update: %v", err)
	}
	if st := th.Metrics(); st.Streams != len(stalled)+1 || st.Overflows != 0 {
		t.Fatalf("stats %+v, want %d streams, no overflow", st, len(stalled)+1)
	}
}
