// Package simconn is an in-memory connection that a hub's engine runs
// like a socket (see engine.DirectConn), for simulating many subscribers
// in one process: no descriptor, no goroutine and no poller entry per
// connection, so nothing but memory bounds how many there are.
//
// A [Conn] discards what it is written, counting the bytes, the events
// (SSE blocks with an id) and the keep-alive comments, per connection and
// in a [Counts] that many connections share, so that a driver can wait
// until every delivery landed. A connection can be given a receive
// buffer ([Conn.SetBuffer]): it then takes only what fits, until its
// client reads ([Conn.Read]) and makes room; and its client can leave
// ([Conn.Leave]).
//
// Use [NewResponseWriter] to hand a Conn to a hub's subscribe handler: it
// is an [http.Hijacker] whose Hijack returns the Conn.
package simconn

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Counts are totals over the connections that share them; every field
// may be read at any time.
type Counts struct {
	// Bytes, Events and Comments count what the connections took: the
	// bytes, the events (blocks with an id) and the comments (keep-alives).
	Bytes, Events, Comments atomic.Int64
	// Open counts the connections not closed yet.
	Open atomic.Int64
}

// Conn is an in-memory connection whose writes never block: see the
// package doc. Its methods are safe for concurrent use.
type Conn struct {
	total  *Counts
	mu     sync.Mutex
	notify func(gone, writable bool)
	// buffer is the most bytes the connection holds unread (0: no bound),
	// held what it holds now.
	buffer, held int
	// bytes, events and comments are this connection's counts.
	bytes, events, comments int64
	closed, gone            bool
	// partial is whether the last write ended inside a slice: the next
	// write's first slice is its rest, not the start of an event.
	partial bool
	// short is whether a write took less than it was given: the next
	// room made is notified.
	short bool
}

// New returns an open connection that adds what it takes to total, which
// may be nil.
func New(total *Counts) *Conn {
	if total == nil {
		total = new(Counts)
	}
	total.Open.Add(1)
	return &Conn{total: total}
}

// ErrNoReads is what reading the connection's request side returns: the
// engine never reads a connection that tells it when its client left.
var ErrNoReads = errors.New("simconn: the connection's client sends nothing")

// WriteNow takes what of iov fits in the receive buffer (all of it
// without one) and counts it: an event for each slice that begins with
// "id: ", a comment for each that begins with ":", as the engine hands
// each event and comment in a slice of its own. It fails once the
// connection is closed or its client left.
func (c *Conn) WriteNow(iov [][]byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.gone {
		return 0, net.ErrClosed
	}
	room := -1 // no bound
	if c.buffer > 0 {
		room = c.buffer - c.held
	}
	n := 0
	var events, comments int64
	for i, b := range iov {
		take := len(b)
		if room >= 0 {
			take = max(0, min(take, room-n))
		}
		if take > 0 && !(i == 0 && c.partial) {
			switch {
			case len(b) >= 4 && string(b[:4]) == "id: ":
				events++
			case b[0] == ':':
				comments++
			}
		}
		n += take
		if take < len(b) {
			c.partial = take > 0 || (i == 0 && c.partial)
			c.short = true
			break
		}
		c.partial = false
	}
	if c.buffer > 0 {
		c.held += n
	}
	c.bytes += int64(n)
	c.events += events
	c.comments += comments
	c.total.Bytes.Add(int64(n))
	if events > 0 {
		c.total.Events.Add(events)
	}
	if comments > 0 {
		c.total.Comments.Add(comments)
	}
	return n, nil
}

// Watch records notify, to call when the client leaves or, after a short
// write, once there is room; if the client left already, at once.
func (c *Conn) Watch(notify func(gone, writable bool)) {
	c.mu.Lock()
	c.notify = notify
	gone := c.gone && !c.closed
	c.mu.Unlock()
	if gone {
		notify(true, false)
	}
}

// SetBuffer bounds what the connection holds unread to n bytes (0: no
// bound): once full, it takes nothing more until its client reads.
func (c *Conn) SetBuffer(n int) {
	c.mu.Lock()
	c.buffer = n
	c.mu.Unlock()
	c.Consume(0)
}

// Consume is the client reading up to n bytes of what the connection
// holds: the room it makes is notified to a writer whose write was short.
func (c *Conn) Consume(n int) {
	c.mu.Lock()
	c.held -= min(n, c.held)
	var notify func(gone, writable bool)
	if c.short && !c.closed && (c.buffer == 0 || c.held < c.buffer) {
		c.short = false
		notify = c.notify
	}
	c.mu.Unlock()
	if notify != nil {
		notify(false, true)
	}
}

// Leave is the client leaving: writes fail from now on, and the watcher
// is told.
func (c *Conn) Leave() {
	c.mu.Lock()
	if c.gone || c.closed {
		c.mu.Unlock()
		return
	}
	c.gone = true
	notify := c.notify
	c.mu.Unlock()
	if notify != nil {
		notify(true, false)
	}
}

// Events returns the events the connection took.
func (c *Conn) Events() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events
}

// Comments returns the comments (keep-alives) the connection took.
func (c *Conn) Comments() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.comments
}

// Bytes returns the bytes the connection took.
func (c *Conn) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Held returns the bytes the connection holds unread.
func (c *Conn) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// Closed reports whether the connection was closed.
func (c *Conn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Read fails: see ErrNoReads.
func (c *Conn) Read([]byte) (int, error) { return 0, ErrNoReads }

// Write writes all of b, or fails with what it took.
func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.WriteNow([][]byte{b})
	if err == nil && n < len(b) {
		err = errors.New("simconn: the receive buffer is full")
	}
	return n, err
}

// Close closes the connection: writes fail from now on, and the watcher
// is not called again.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed, c.notify = true, nil
	c.total.Open.Add(-1)
	return nil
}

// LocalAddr returns a placeholder address.
func (c *Conn) LocalAddr() net.Addr { return addr{} }

// RemoteAddr returns a placeholder address.
func (c *Conn) RemoteAddr() net.Addr { return addr{} }

// SetDeadline does nothing: no call blocks.
func (c *Conn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline does nothing: no call blocks.
func (c *Conn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline does nothing: no call blocks.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }

type addr struct{}

func (addr) Network() string { return "sim" }
func (addr) String() string  { return "sim" }

// ResponseWriter is an [http.ResponseWriter] that a handler can hijack,
// whose Hijack returns its Conn: what a hub's subscribe handler needs to
// hand its stream's connection to the engine. What is written before the
// hijack (the headers, the stream's first block) is counted in Header
// and Written only.
type ResponseWriter struct {
	Conn    *Conn
	Status  int
	Written int
	header  http.Header
}

// NewResponseWriter returns a ResponseWriter of conn.
func NewResponseWriter(conn *Conn) *ResponseWriter {
	return &ResponseWriter{Conn: conn, header: make(http.Header)}
}

// Header returns the response's header.
func (w *ResponseWriter) Header() http.Header { return w.header }

// WriteHeader records the status.
func (w *ResponseWriter) WriteHeader(status int) {
	if w.Status == 0 {
		w.Status = status
	}
}

// Write discards b, counting it.
func (w *ResponseWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.Written += len(b)
	return len(b), nil
}

// SetWriteDeadline does nothing: no write blocks. With it,
// [http.ResponseController] finds the writer able to set deadlines.
func (w *ResponseWriter) SetWriteDeadline(time.Time) error { return nil }

// SetReadDeadline does nothing: nothing is read.
func (w *ResponseWriter) SetReadDeadline(time.Time) error { return nil }

// Flush does nothing: nothing is buffered.
func (w *ResponseWriter) Flush() {}

// Hijack returns the Conn, with nothing buffered from its client.
func (w *ResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.Conn, noInput, nil
}

// noInput is every hijacked connection's buffered reader and writer:
// nothing reads or writes through them (the engine only asks whether the
// reader holds a pipelined request), so one serves them all.
var noInput = bufio.NewReadWriter(bufio.NewReaderSize(strings.NewReader(""), 16), bufio.NewWriterSize(discard{}, 16))

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
