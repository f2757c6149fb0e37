package engine

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/simconn"
	"github.com/mercurekit/mercure/internal/testwait"
)

// serveDirect opens a detached stream of topic "x" on e over an
// in-memory connection, and returns the connection once the stream's
// handler has returned.
func serveDirect(t *testing.T, e *Engine, o *owner) *simconn.Conn {
	t.Helper()
	conn := simconn.New(nil)
	w := simconn.NewResponseWriter(conn)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if err := e.Serve(w, r, Spec{Owner: o, Client: "client", Matchers: []Matcher{exact("x")}}); err != nil {
		t.Fatal(err)
	}
	if w.Status != http.StatusOK {
		t.Fatalf("status %d", w.Status)
	}
	return conn
}

// TestDirectConn runs detached streams over connections that implement
// DirectConn: no descriptor, no poller, no goroutine per stream.
func TestDirectConn(t *testing.T) {
	t.Parallel()
	detach := func(keepAlive time.Duration) func(*Config) {
		return func(c *Config) {
			c.Detach = true
			if keepAlive > 0 {
				c.KeepAlive = keepAlive
			}
		}
	}
	t.Run("receives events without a poller or a reader", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, detach(0))
		conn := serveDirect(t, e, &owner{})
		f := &feeder{e: e}
		for range 3 {
			f.push(false, "hello", "x")
		}
		testwait.For(t, "3 events on the connection", func() bool { return conn.Events() == 3 })
		e.conns.mu.Lock()
		p := e.conns.poller
		e.conns.mu.Unlock()
		if p != nil {
			t.Error("a poller was started for an in-memory connection")
		}
		if n := e.conns.count(); n != 1 {
			t.Errorf("%d detached streams, want 1", n)
		}
	})
	t.Run("keep-alives", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, detach(20*time.Millisecond))
		conn := serveDirect(t, e, &owner{})
		testwait.For(t, "a keep-alive comment", func() bool { return conn.Comments() >= 2 })
		if conn.Events() != 0 {
			t.Errorf("%d events, want none", conn.Events())
		}
	})
	t.Run("ends when the client leaves", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, detach(0))
		o := &owner{}
		conn := serveDirect(t, e, o)
		conn.Leave()
		testwait.For(t, "the stream to end", func() bool { return o.ended.Load() == 1 && conn.Closed() && e.Streams() == 0 })
		if got := e.counters.StreamsClosed[EndClientGone].Load(); got != 1 {
			t.Errorf("%d streams closed for their client gone, want 1", got)
		}
	})
	t.Run("resumes when the connection can take more", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, detach(0))
		conn := serveDirect(t, e, &owner{})
		conn.SetBuffer(64)
		f := &feeder{e: e}
		for range 5 {
			f.push(false, strings.Repeat("d", 100), "x")
		}
		testwait.For(t, "the connection to fill", func() bool { return conn.Held() == 64 })
		if n := conn.Events(); n != 1 {
			t.Fatalf("%d events taken by a full 64-byte buffer, want 1", n)
		}
		testwait.For(t, "every event, as the client reads", func() bool {
			conn.Consume(1 << 20)
			return conn.Events() == 5
		})
		if e.Streams() != 1 {
			t.Error("the stream ended")
		}
		conn.SetBuffer(0) // room for its last chunk, once the engine stops
	})
	t.Run("ends cleanly when the engine stops", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, detach(0))
		o := &owner{}
		conn := serveDirect(t, e, o)
		e.Stop()
		testwait.For(t, "the stream to end", func() bool { return o.ended.Load() == 1 && conn.Closed() })
		if got := e.counters.StreamsClosed[EndShutdown].Load(); got != 1 {
			t.Errorf("%d streams closed for shutdown, want 1", got)
		}
	})
}
