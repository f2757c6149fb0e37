package engine

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Detached streams: once a stream's headers (and its replay) are sent,
// the engine takes its HTTP/1.1 connection over from net/http, so that an
// idle stream holds no goroutine and no net/http buffers. A small pool of
// writers (writers.go) runs the streams that have something to do:
// events (enqueue), timers (expiry, write delay, stalls), the keep-alive
// sweep, the poller (a client gone, a connection that can take more) and
// the engine (an ending, an abort, a stop). A writer never waits for a
// client: it writes what the connection takes at once, and keeps the
// rest (slices of the events' shared bytes, never a copy) for when the
// connection can take more; meanwhile the stream is blocked: its events
// only queue, counted by the limits, and no writer runs it.

// conns is the registry of an engine's detached streams.
type conns struct {
	mu      sync.Mutex
	streams map[uint64]*Stream // by id, also the poller's key
	nextID  uint64
	poller  *poller // nil when no stream is watched
	noPoll  bool    // no poller: streams are read instead
	// wg counts the poller, the readers and the writes on goroutines of
	// their own, for Wait.
	wg sync.WaitGroup

	warnedProto, warnedHijack, warnedPoll atomic.Bool
}

// connState is a detached stream's connection state; its writer alone
// touches it, but for inFlight and what the write on a goroutine of its
// own hands back.
type connState struct {
	conn net.Conn // nil once the engine holds fd instead
	// fd is the socket's own descriptor once the engine let go of conn
	// (Linux, watched by the poller), -1 before or otherwise: an idle
	// stream then holds no net.Conn, its addresses and its runtime poll
	// state, about 600 bytes. Its writer alone uses and closes it.
	fd     int
	id     uint64
	shard  uint32
	poller *poller // that watches conn; nil when a reader does
	// sock is conn's socket, written without ever blocking; nil when
	// conn is not a plain socket (TLS): each write then runs on a
	// goroutine of its own (see offload).
	sock syscall.RawConn
	// out is the chunk the connection did not take at once, nil
	// otherwise: most streams, idle or keeping up, hold none.
	out      *unfinished
	outArmed bool // the poller reports when conn can take more
	// direct is whether conn is a DirectConn: it writes without blocking
	// and says itself when to write again, and needs neither sock nor
	// the poller (a bool, not the interface: a field the layout has room
	// for).
	direct bool

	// Writes without sock: while inFlight, a goroutine writes out and
	// alone touches it; clearing inFlight hands it back to the writer
	// that runs the stream, which sees offloaded.
	inFlight  atomic.Bool
	offloaded bool
}

// unfinished is a chunk being written: what its connection has not
// taken yet, and what it carries.
type unfinished struct {
	// pending is what the connection did not take yet of the chunk:
	// slices of shared bytes, in order. It goes out before anything
	// else. plan is what the chunk carries: its events count against the
	// limits until the chunk is written.
	pending  [][]byte
	plan     plan
	progress time.Time // when the connection last took some of pending
	backoff  time.Duration
	writeErr error // of a write on a goroutine of its own
}

// Retries of an unfinished write, where no poller says when to retry:
// from retryMin, doubling up to retryMax while the connection takes
// nothing.
const (
	retryMin = time.Millisecond
	retryMax = 64 * time.Millisecond
)

// detachable reports whether the stream of r, answered through w, is to
// be detached once its headers are sent: with Config.Detach, for HTTP/1.1
// requests to a ResponseWriter that can be hijacked (its header then says
// Connection: close). The first stream that cannot be is logged, once per
// engine and reason.
func (e *Engine) detachable(w http.ResponseWriter, r *http.Request) bool {
	if !e.cfg.Detach {
		return false
	}
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 {
		if e.conns.warnedProto.CompareAndSwap(false, true) {
			e.log.Info("mercure: streams over protocols other than HTTP/1.1 are served by net/http, each with its goroutine", "proto", r.Proto)
		}
		return false
	}
	if !hijackable(w) {
		e.warnHijack("the response writer cannot be hijacked (middleware without Unwrap?)")
		return false
	}
	return true
}

func (e *Engine) warnHijack(why string) {
	if e.conns.warnedHijack.CompareAndSwap(false, true) {
		e.log.Warn("mercure: " + why + "; such streams are served by net/http, each with its goroutine")
	}
}

// hijackable reports whether w, or a ResponseWriter it unwraps to, is an
// [http.Hijacker]: what [http.ResponseController.Hijack] looks for.
func hijackable(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case http.Hijacker:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// detach takes the connection of s over from net/http, once the headers
// and the replay are flushed: the stream goes on without its handler,
// which returns. net/http frames an HTTP/1.1 response without a length
// as chunked, and leaves the chunked body open when the handler hijacks
// the connection: the stream writes the next chunks itself, and the last
// one when it ends cleanly. detach reports false when the connection
// cannot be taken over: the handler then serves the stream as usual.
// Once it reports true, the stream cleans up after itself when it ends.
func (e *Engine) detach(s *Stream) bool {
	hdr := s.h.w.Header()
	if hdr.Get("Content-Encoding") != "" || hdr.Get("Content-Length") != "" || hdr.Get("Transfer-Encoding") != "" {
		// Middleware that transforms the body: raw chunks would bypass it.
		e.warnHijack("middleware transforms the response body")
		return false
	}
	conn, rw, err := s.h.rc.Hijack()
	if err != nil {
		e.warnHijack("hijacking failed: " + err.Error())
		return false
	}
	// SUB-17: net/http's Hijack clears the server's deadlines today, but
	// its documentation leaves that to the caller: a ReadTimeout or
	// WriteTimeout left on the connection would end the stream.
	_ = conn.SetDeadline(time.Time{})
	c := &connState{conn: conn, sock: socketOf(conn), fd: -1, shard: e.writers.assign()}
	_, c.direct = conn.(DirectConn)
	s.mu.Lock()
	s.h = nil // valid while the handler runs only
	s.conns = c
	s.deadline = 0
	s.mu.Unlock()
	if rw.Reader.Buffered() > 0 {
		// The client sent more than its request: a pipelined request,
		// which this connection will never answer.
		conn.Close()
		s.setEnd(EndClientGone)
		e.close(s, nil, true)
		return true
	}

	cs := &e.conns
	cs.mu.Lock()
	if cs.streams == nil {
		cs.streams = make(map[uint64]*Stream)
	}
	cs.nextID++
	c.id = cs.nextID
	cs.streams[c.id] = s
	cs.mu.Unlock()
	if c.direct {
		s.watchDirect(c.conn.(DirectConn)) // no descriptor, poller or reader
	} else if !e.watch(s) {
		return true // ended
	}
	// Whatever came meanwhile (events, an ending, a stop) is seen by this
	// first run.
	s.detached.Store(true)
	e.writers.schedule(s)
	return true
}

// watch has the poller watch the connection of s, which detach just
// took over, or else a goroutine read it. It reports false when s ended
// instead.
func (e *Engine) watch(s *Stream) bool {
	c, cs := s.conns, &e.conns
	cs.mu.Lock()
	p := cs.poller
	if p == nil && !cs.noPoll {
		var err error
		if p, err = newPoller(e); err != nil {
			cs.noPoll = true
			if !errors.Is(err, errNoPoller) {
				e.log.Warn("mercure: cannot watch connections; each detached stream keeps a goroutine reading its connection", "error", err)
			}
		}
		cs.poller = p
	}
	cs.mu.Unlock()

	if p != nil && c.sock != nil {
		s.ownSocket()
	}
	if p == nil || p.add(c) != nil {
		if p != nil && cs.warnedPoll.CompareAndSwap(false, true) {
			e.log.Warn("mercure: a connection cannot be watched (no file descriptor?); its stream keeps a goroutine reading it")
		}
		if c.conn == nil && !s.restoreConn() {
			s.endDetached(EndWriteError)
			return false
		}
		e.read(s)
	} else {
		c.poller = p
	}
	return true
}

// runDetached does what s was woken for: it writes what the connection
// did not take yet, then what step plans (the queued events as one
// chunk, in one system call; a keep-alive; a farewell and the last
// chunk), or ends the stream. sc is the writer's scratch.
func (s *Stream) runDetached(sc *scratch) {
	e, c := s.e, s.conns
	s.mu.Lock()
	flags := s.flags
	s.flags &^= flagWritable | flagStalled
	gone := flags&flagGone != 0 || s.state == stateAborted || s.state == stateFinished
	s.mu.Unlock()
	if gone {
		s.endDetached(EndClientGone)
		return
	}
	if c.inFlight.Load() {
		return // its goroutine wakes s once the write is done
	}
	if c.offloaded {
		c.offloaded = false
		if c.out.writeErr != nil {
			s.endDetached(EndWriteError)
			return
		}
		if s.sent() {
			return
		}
	}
	if c.out != nil {
		if flags&(flagWritable|flagStalled) == 0 {
			return // blocked: the poller (or a timer) says when to try again
		}
		// The write timeout counts from the last progress: a stream cut
		// for it made none for that long.
		if time.Since(c.out.progress) >= e.cfg.WriteTimeout {
			s.endDetached(EndWriteError)
			return
		}
		if err := s.flushPending(); err != nil {
			s.endDetached(EndWriteError)
			return
		}
		if len(c.out.pending) > 0 {
			if flags&flagStalled != 0 {
				s.timers.stall.Reset(time.Until(c.out.progress.Add(e.cfg.WriteTimeout)))
			}
			return
		}
		if s.sent() {
			return
		}
	}
	p := s.step(time.Now())
	if p.abort {
		s.endDetached(EndUnset)
		return
	}
	iov := sc.chunk(s, p)
	if len(iov) == 0 {
		s.done(p, true, time.Now())
		return
	}
	if p.end {
		s.settle(nil) // before the client can see the end
	}
	if err := s.send(iov, p); err != nil {
		s.endDetached(EndWriteError)
		return
	}
	if c.out == nil {
		s.wrote(p)
	}
}

// sent records that the unfinished chunk is written, and ends the
// stream if the chunk was its last: it then reports true.
func (s *Stream) sent() (ended bool) {
	c := s.conns
	p := c.out.plan
	c.out = nil
	return s.wrote(p)
}

// wrote records that the chunk carrying p is written, and ends the
// stream if p ends it: it then reports true.
func (s *Stream) wrote(p plan) (ended bool) {
	s.done(p, true, time.Now())
	if p.end {
		s.endDetached(EndUnset)
	}
	return p.end
}

// scratch is a writer's reusable buffers.
type scratch struct {
	iov []([]byte)
	hdr [20]byte
}

// chunk returns the iovecs of the chunk that carries p: its size line,
// the events the replay did not cover, the comment, the farewell, then,
// when p ends the stream, the last chunk. It is nil when there is
// nothing to write. The events' bytes are shared, never copied.
func (sc *scratch) chunk(s *Stream, p plan) [][]byte {
	n := 0
	for _, ev := range p.events {
		if ev.Seq > s.minSeq {
			n += len(ev.Bytes)
		}
	}
	if p.comment {
		n += len(keepAliveComment)
	}
	n += len(p.farewell)
	iov := sc.iov[:0]
	if n > 0 { // one chunk; never an empty one, which would end the body
		iov = append(iov, append(strconv.AppendInt(sc.hdr[:0], int64(n), 16), "\r\n"...))
		if p.comment {
			iov = append(iov, keepAliveComment)
		}
		for _, ev := range p.events {
			if ev.Seq > s.minSeq {
				iov = append(iov, ev.Bytes)
			}
		}
		if p.farewell != nil {
			iov = append(iov, p.farewell)
		}
		iov = append(iov, crlf)
	}
	if p.end {
		iov = append(iov, lastChunk)
	}
	sc.iov = iov
	return iov
}

// send writes iov, the next bytes of the body, the chunk carrying p. On
// a socket, it writes what the connection takes now and keeps the rest
// in c.out, to be written when the connection can take more; otherwise
// it hands the bytes to a goroutine that writes them under the write
// timeout.
func (s *Stream) send(iov [][]byte, p plan) error {
	c := s.conns
	if c.sock == nil && c.fd < 0 && !c.direct {
		c.out = &unfinished{pending: append([][]byte(nil), iov...), plan: p}
		c.out.pending[0] = append([]byte(nil), iov[0]...) // the scratch's size line
		c.offloaded = true
		s.offload()
		return nil
	}
	n, err := c.writev(iov)
	if err != nil {
		return err
	}
	if n > 0 {
		s.lastWrite.Store(time.Now().UnixNano())
	}
	rest := skip(iov, n)
	if len(rest) == 0 {
		return nil
	}
	// The rest waits for room: the events' slices are kept, not their
	// bytes; what is left of the size line, the scratch's, is copied.
	if len(rest) == len(iov) {
		rest[0] = append([]byte(nil), rest[0]...)
	}
	// The stall clock starts now: the write timeout is for making no
	// progress at all, not for writing the whole chunk.
	c.out = &unfinished{pending: append([][]byte(nil), rest...), plan: p, progress: time.Now()}
	t := s.timersFor()
	if t.stall == nil {
		t.stall = time.AfterFunc(s.e.cfg.WriteTimeout, func() { s.signal(flagStalled) })
	} else {
		t.stall.Reset(s.e.cfg.WriteTimeout)
	}
	s.waitRoom()
	return nil
}

// writev writes as much of iov as the connection takes without
// blocking: see writevNow and DirectConn.
func (c *connState) writev(iov [][]byte) (int, error) {
	if c.direct {
		return c.conn.(DirectConn).WriteNow(iov)
	}
	if c.conn == nil {
		return writevFD(c.fd, iov)
	}
	return writevNow(c.sock, iov)
}

// ownSocket lets go of the connection of s, keeping its socket's
// descriptor (a duplicate) instead, when it can: the writes never block,
// and the poller, not a deadline, says when to write again, so that the
// net.Conn has nothing left to do but to cost memory.
func (s *Stream) ownSocket() {
	c := s.conns
	fd, err := dupSocket(c.sock)
	if err != nil {
		return // keep the net.Conn: nothing lost but its memory
	}
	conn := c.conn
	s.mu.Lock() // cut reads c.conn
	c.conn, c.sock, c.fd = nil, nil, fd
	s.mu.Unlock()
	conn.Close() // the duplicate keeps the socket open
}

// restoreConn gives a stream whose descriptor the poller cannot watch a
// net.Conn again, for a goroutine to read (see Engine.read). It reports
// false when that failed: the descriptor is then closed.
func (s *Stream) restoreConn() bool {
	c := s.conns
	conn, err := connOf(c.fd)
	closeFD(c.fd)
	s.mu.Lock()
	c.fd = -1
	if err == nil {
		c.conn, c.sock = conn, socketOf(conn)
	}
	s.mu.Unlock()
	return err == nil
}

// skip returns what is left of iov once n bytes of it are written.
func skip(iov [][]byte, n int) [][]byte {
	for len(iov) > 0 && n >= len(iov[0]) {
		n -= len(iov[0])
		iov = iov[1:]
	}
	if n > 0 {
		iov[0] = iov[0][n:]
	}
	return iov
}

// flushPending writes what the connection takes now of the pending
// bytes: all of them, or the rest waits for room again.
func (s *Stream) flushPending() error {
	c := s.conns
	u := c.out
	n, err := c.writev(u.pending)
	if err != nil {
		return err
	}
	if n > 0 {
		u.progress, u.backoff = time.Now(), 0
		s.lastWrite.Store(time.Now().UnixNano())
	}
	rest := skip(u.pending, n)
	if len(rest) > 0 {
		u.pending = u.pending[:copy(u.pending, rest)]
		s.waitRoom()
		return nil
	}
	u.pending = nil
	s.timers.stall.Stop()
	if s.timers.retry != nil {
		s.timers.retry.Stop()
	}
	s.mu.Lock()
	s.blocked = false
	s.mu.Unlock()
	if c.outArmed {
		c.outArmed = false
		_ = c.poller.watch(c, false) // fails once conn is closed only
	}
	return nil
}

// waitRoom blocks s until its connection can take more: the poller says
// when, or else a timer retries, with a backoff. Meanwhile the writers
// do not run it for its events.
func (s *Stream) waitRoom() {
	c := s.conns
	s.mu.Lock()
	s.blocked = true
	s.mu.Unlock()
	if c.direct {
		return // the connection says when (see DirectConn.Watch)
	}
	if c.poller != nil && c.poller.watch(c, true) == nil {
		c.outArmed = true
		return
	}
	u := c.out
	u.backoff = min(max(2*u.backoff, retryMin), retryMax)
	t := s.timersFor()
	if t.retry == nil {
		t.retry = time.AfterFunc(u.backoff, func() { s.signal(flagWritable) })
	} else {
		t.retry.Reset(u.backoff)
	}
}

// offload writes the pending bytes on a goroutine of its own, where the
// connection is not a plain socket (TLS): a write there cannot be tried
// without blocking, and a TLS write that times out breaks the connection
// for good. The goroutine lives as long as the write, bounded by the
// write timeout as for a stream's own goroutine; it then wakes the
// stream, which its writer ends if the write failed. Small slices are
// gathered into records of up to 16 KiB: a copy of at most that much,
// whatever the chunk's size.
func (s *Stream) offload() {
	c := s.conns
	u := c.out
	cs := &s.e.conns
	c.inFlight.Store(true)
	s.mu.Lock()
	s.blocked = true
	s.mu.Unlock()
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		var rec []byte
		var err error
		for i, b := range u.pending {
			if len(rec)+len(b) > 16<<10 && len(rec) > 0 {
				if err = s.writeConn(rec); err != nil {
					break
				}
				rec = rec[:0]
			}
			if len(b) >= 16<<10 {
				if err = s.writeConn(b); err != nil {
					break
				}
			} else {
				rec = append(rec, b...)
			}
			u.pending[i] = nil
		}
		if err == nil && len(rec) > 0 {
			err = s.writeConn(rec)
		}
		u.writeErr = err
		u.pending = nil
		if err == nil {
			s.lastWrite.Store(time.Now().UnixNano())
		}
		s.mu.Lock()
		s.blocked = false
		s.mu.Unlock()
		c.inFlight.Store(false)
		s.signal(flagWritable)
	}()
}

// writeConn writes b to the connection under a write deadline, as the
// goroutine writer does through the ResponseWriter, and records the
// progress (see stuckLocked).
func (s *Stream) writeConn(b []byte) error {
	now := time.Now()
	if timeout := s.e.cfg.WriteTimeout; s.deadline-now.UnixNano() < int64(timeout/2) {
		if err := s.extendDeadline(now.Add(timeout)); err != nil {
			return err
		}
	}
	_, err := s.conns.conn.Write(b)
	if err == nil {
		s.lastWrite.Store(time.Now().UnixNano())
	}
	return err
}

// endDetached closes the connection of s and cleans up after it, once:
// only the writer running s (or detach) calls it. why, if set, is why s
// ends unless it is known already.
func (s *Stream) endDetached(why EndReason) {
	e, c := s.e, s.conns
	s.sched.Store(schedEnded)
	if why != EndUnset {
		s.setEnd(why)
	}
	if c.poller != nil {
		c.poller.remove(c) // before Close: its descriptor may be reused
	}
	if c.conn == nil {
		closeFD(c.fd)
	} else if t, ok := c.conn.(*tls.Conn); ok {
		// Not t.Close: its close_notify alert could wait for a peer that
		// stopped reading, for seconds, on a writer. A write on its
		// goroutine fails at once.
		t.NetConn().Close()
	} else {
		c.conn.Close()
	}
	cs := &e.conns
	cs.mu.Lock()
	delete(cs.streams, c.id)
	var p *poller
	last := len(cs.streams) == 0
	if last {
		p, cs.poller = cs.poller, nil // no stream left: the poller exits
	}
	cs.mu.Unlock()
	if p != nil {
		p.stop()
	}
	if last {
		e.writers.wakeAll() // idle writers exit
	}
	// c.out may still be a write's on a goroutine of its own: it
	// fails now that the connection is closed, and lets go of it.
	e.close(s, nil, true)
}

// count is the number of detached streams.
func (cs *conns) count() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.streams)
}

// signalID wakes the detached stream with this id for flags: its client
// left, or its connection can take more.
func (cs *conns) signalID(id uint64, flags uint8) {
	cs.mu.Lock()
	s := cs.streams[id]
	cs.mu.Unlock()
	if s != nil {
		s.signal(flags)
	}
}

// read watches the connection of s with a goroutine blocked reading it,
// where no poller can: an SSE client sends nothing once its request is
// sent, so that a read returns when it leaves.
func (e *Engine) read(s *Stream) {
	c := s.conns
	e.conns.wg.Add(1)
	go func() {
		defer e.conns.wg.Done()
		var b [1]byte
		_, _ = c.conn.Read(b[:])
		s.signal(flagGone)
	}()
}

// errNoPoller says that the system has no poller: streams are read.
var errNoPoller = errors.New("no connection poller on this system")
