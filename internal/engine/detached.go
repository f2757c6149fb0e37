package engine

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// lowMem runs a hub's detached streams: streams whose connection the hub
// took over from net/http (see [WithLowMemoryStreams]). An idle detached
// stream has no goroutine: events (enqueue), timers (keep-alive, write
// delay, expiry), the poller (client gone) and the hub (overflow, gap,
// shutdown) schedule it on a run queue, which a bounded pool of writer
// goroutines serves. A stream is run by one writer at a time.
type lowMem struct {
	mu      sync.Mutex
	streams map[uint64]*detached // by id, also the poller's key
	nextID  uint64
	queue   []*detached // the run queue, from head
	head    int
	writers int // writer goroutines running
	// idle counts the writers waiting for work that no token claimed
	// yet: each push claims one (a token on wake), or starts a writer, so
	// that a queued stream never waits behind a writer stuck on a write
	// while fewer than maxWriters run.
	idle   int
	wake   chan struct{}
	poller *poller // nil when no stream is watched
	noPoll bool    // no poller on this system: streams are read instead
	// wg counts the writers, the poller and the readers, for Shutdown.
	wg sync.WaitGroup

	warnedProto, warnedHijack, warnedPoll atomic.Bool
}

// maxWriters bounds the writer goroutines of a hub.
var maxWriters = max(16, 4*runtime.GOMAXPROCS(0))

// writerIdle is how long a writer waits for work before it exits.
const writerIdle = 2 * time.Second

// detached is the state of a detached stream.
type detached struct {
	s      *Stream
	conn   net.Conn
	id     uint64
	minSeq uint64  // events up to here were replayed
	poller *poller // that watches conn; nil when a reader does
	// sock is conn's socket, written without ever blocking; nil when
	// conn is not a plain socket (TLS): each write then runs on a
	// goroutine of its own (see send).
	sock syscall.RawConn

	// Under lowMem.mu.
	state uint8
	again bool  // scheduled while running: run once more
	flags uint8 // why it was scheduled, since its last run

	// The writer running the stream alone touches these.
	lastWrite  time.Time // zero: the first update is not delayed
	delayArmed bool      // updates wait for the write delay
	keepAlive  *time.Timer
	expiry     *time.Timer
	delay      *time.Timer
	spare      []*Event

	// pending is the end of the last chunks written, which the connection
	// did not take yet: it goes out before anything else. It is at most
	// one batch, bounded by the queue limits.
	pending  []byte
	final    bool        // pending ends the body: the stream ends once it is written
	closing  bool        // the stream ends cleanly, once pending is written
	ending   bool        // after a feed gap or in a drain: write what is queued, then end
	endWhy   EndReason   // with ending: why the stream ends
	farewell []byte      // with ending: written last (a drain's retry field)
	progress time.Time   // when the connection last took some of pending
	stall    *time.Timer // fires when pending may have made no progress for the write timeout
	retry    *time.Timer // with no poller: tries pending again
	backoff  time.Duration
	outArmed bool // the poller reports when conn can take more

	// Writes without sock: while inFlight, a goroutine writes pending
	// and alone touches it and writeErr; clearing inFlight hands them
	// back to the writer that runs d.
	inFlight atomic.Bool
	writeErr error
}

// States of a detached stream.
const (
	stateIdle    uint8 = iota // waits for a reason to run
	stateQueued               // on the run queue
	stateRunning              // a writer (or its setup) runs it
	stateEnded                // its connection is closed
)

// Why a detached stream is scheduled, besides its queue and its channels.
const (
	flagUrgent    uint8 = 1 << iota // the queue is half full: no write delay
	flagKeepAlive                   // the keep-alive timer fired
	flagExpired                     // the token or the maximum lifetime ended
	flagGone                        // the client left (or sent something)
	flagDelayOver                   // the write delay timer fired
	flagWritable                    // the connection can take more, or a write on a goroutine ended
	flagStalled                     // the stall timer fired
)

// Retries of an unfinished write, where no poller says when to retry:
// from retryMin, doubling up to retryMax while the connection takes
// nothing.
const (
	retryMin = time.Millisecond
	retryMax = 64 * time.Millisecond
)

// Detachable reports whether the stream of r, answered through w, is to
// be detached once its headers are sent: with Config.Detach, for HTTP/1.1
// requests to a ResponseWriter that can be hijacked; it then sets the
// response's Connection: close (the engine keeps the connection). The
// first stream that cannot be is logged, once per engine and reason.
func (e *Engine) Detachable(w http.ResponseWriter, r *http.Request) bool {
	if !e.cfg.Detach {
		return false
	}
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 {
		if e.lm.warnedProto.CompareAndSwap(false, true) {
			e.log.Info("mercure: low-memory mode applies to HTTP/1.1 only: streams over other protocols are served by net/http, each with its goroutine", "proto", r.Proto)
		}
		return false
	}
	if !hijackable(w) {
		e.warnHijack("the response writer cannot be hijacked (middleware without Unwrap?)")
		return false
	}
	w.Header().Set("Connection", "close")
	return true
}

func (e *Engine) warnHijack(why string) {
	if e.lm.warnedHijack.CompareAndSwap(false, true) {
		e.log.Warn("mercure: low-memory mode: " + why + "; such streams are served by net/http, each with its goroutine")
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
func (e *Engine) detach(s *Stream, minSeq uint64) bool {
	hdr := s.w.Header()
	if hdr.Get("Content-Encoding") != "" || hdr.Get("Content-Length") != "" || hdr.Get("Transfer-Encoding") != "" {
		// Middleware that transforms the body: raw chunks would bypass it.
		e.warnHijack("middleware transforms the response body")
		return false
	}
	conn, rw, err := s.rc.Hijack()
	if err != nil {
		e.warnHijack("hijacking failed: " + err.Error())
		return false
	}
	d := &detached{s: s, conn: conn, minSeq: minSeq, sock: socketOf(conn)}
	s.mu.Lock()
	s.w, s.rc = nil, nil // valid while the handler runs only
	s.conn = conn
	s.deadline = time.Time{} // Hijack cleared it
	s.mu.Unlock()
	if rw.Reader.Buffered() > 0 {
		// The client sent more than its request: a pipelined request,
		// which this connection will never answer.
		conn.Close()
		s.failed(nil)
		e.close(s, true)
		return true
	}

	lm := &e.lm
	lm.mu.Lock()
	if lm.streams == nil {
		lm.streams = make(map[uint64]*detached)
		lm.wake = make(chan struct{}, maxWriters)
	}
	lm.nextID++
	d.id = lm.nextID
	lm.streams[d.id] = d
	d.state = stateRunning // set up here: scheduling waits
	p := lm.poller
	if p == nil && !lm.noPoll {
		if p, err = newPoller(lm, e); err != nil {
			lm.noPoll = true
			if !errors.Is(err, errNoPoller) {
				e.log.Warn("mercure: low-memory mode: cannot watch connections; each stream keeps a goroutine reading its connection", "error", err)
			}
		}
		lm.poller = p
	}
	lm.mu.Unlock()

	d.keepAlive = time.AfterFunc(e.cfg.KeepAlive, func() { lm.schedule(d, flagKeepAlive) })
	if !s.expiry.IsZero() {
		d.expiry = time.AfterFunc(time.Until(s.expiry), func() { lm.schedule(d, flagExpired) })
	}
	if p == nil || p.add(d) != nil {
		if p != nil && e.lm.warnedPoll.CompareAndSwap(false, true) {
			e.log.Warn("mercure: low-memory mode: a connection cannot be watched (no file descriptor?); its stream keeps a goroutine reading it")
		}
		lm.read(d)
	} else {
		d.poller = p
	}
	s.lm.Store(d)
	// Whatever came meanwhile (events, overflow, shutdown) is seen by
	// this first run.
	lm.mu.Lock()
	d.state = stateQueued
	lm.push(d)
	lm.mu.Unlock()
	return true
}

// wakeDetached schedules s, if detached, to see why it was woken (an
// abort, a gap): its channels and flags say.
func (s *Stream) wakeDetached(flags uint8) {
	if d := s.lm.Load(); d != nil {
		s.e.lm.schedule(d, flags)
	}
}

// schedule puts d on the run queue, unless it is there already or ended;
// a running stream runs again.
func (lm *lowMem) schedule(d *detached, flags uint8) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.scheduleLocked(d, flags)
}

func (lm *lowMem) scheduleLocked(d *detached, flags uint8) {
	switch d.state {
	case stateEnded:
		return
	case stateIdle:
		d.state = stateQueued
		lm.push(d)
	case stateRunning:
		d.again = true
	}
	d.flags |= flags
}

// scheduleEvent schedules d, to which an event was queued; urgent says
// that its queue is half full, with a write delay.
func (lm *lowMem) scheduleEvent(d *detached, urgent bool) {
	var flags uint8
	if urgent {
		flags = flagUrgent
	}
	lm.schedule(d, flags)
}

// gone schedules the stream with this id, whose client left.
func (lm *lowMem) gone(id uint64) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if d := lm.streams[id]; d != nil {
		lm.scheduleLocked(d, flagGone)
	}
}

// writable schedules the stream with this id, whose connection can take
// more bytes.
func (lm *lowMem) writable(id uint64) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if d := lm.streams[id]; d != nil {
		lm.scheduleLocked(d, flagWritable)
	}
}

// wakeAll schedules every detached stream: the hub shuts down.
func (lm *lowMem) wakeAll() {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	for _, d := range lm.streams {
		lm.scheduleLocked(d, 0)
	}
}

// push appends d to the run queue and makes sure a writer will take it.
// The caller holds lm.mu.
func (lm *lowMem) push(d *detached) {
	lm.queue = append(lm.queue, d)
	if lm.idle > 0 {
		lm.idle--
		lm.wake <- struct{}{} // never blocks: fewer tokens than writers
		return
	}
	if lm.writers < maxWriters {
		lm.writers++
		lm.wg.Add(1)
		go lm.writer()
	}
}

// pop takes the next stream off the run queue, nil when it is empty. The
// caller holds lm.mu.
func (lm *lowMem) pop() *detached {
	if lm.head == len(lm.queue) {
		return nil
	}
	d := lm.queue[lm.head]
	lm.queue[lm.head] = nil
	lm.head++
	switch {
	case lm.head == len(lm.queue):
		lm.queue, lm.head = lm.queue[:0], 0
		if cap(lm.queue) > 1024 {
			lm.queue = nil // a burst is over: give its memory back
		}
	case lm.head >= 1024 && lm.head*2 >= len(lm.queue):
		n := copy(lm.queue, lm.queue[lm.head:])
		clear(lm.queue[n:])
		lm.queue, lm.head = lm.queue[:n], 0
	}
	return d
}

// writer runs queued streams until there is no work for writerIdle, or no
// detached stream is left.
func (lm *lowMem) writer() {
	defer lm.wg.Done()
	var buf []byte
	var timer *time.Timer
	lm.mu.Lock()
	for {
		if d := lm.pop(); d != nil {
			flags := d.flags
			d.flags, d.again, d.state = 0, false, stateRunning
			lm.mu.Unlock()
			buf = d.run(flags, buf)
			if cap(buf) > 1<<20 {
				buf = nil // a large batch is written: do not keep its buffer
			}
			lm.mu.Lock()
			if d.state == stateRunning {
				if d.again {
					d.state = stateQueued
					lm.queue = append(lm.queue, d) // this writer takes it, or another
				} else {
					d.state = stateIdle
				}
			}
			continue
		}
		if len(lm.streams) == 0 {
			break
		}
		lm.idle++
		lm.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(writerIdle)
			defer timer.Stop()
		} else {
			timer.Reset(writerIdle)
		}
		select {
		case <-lm.wake:
			lm.mu.Lock()
			continue
		case <-timer.C:
		}
		lm.mu.Lock()
		select {
		case <-lm.wake: // claimed meanwhile
			continue
		default:
		}
		lm.idle--
		if lm.head == len(lm.queue) {
			break
		}
	}
	lm.writers--
	lm.mu.Unlock()
}

// run does what d was scheduled for: it writes the queued events (one
// chunk, one write), a keep-alive when due, or ends the stream. A write
// the connection does not take at once stays pending, and goes out first
// when the connection can take more: meanwhile events wait in the
// stream's queue, and the writer runs other streams. It returns buf, the
// writer's buffer, for reuse.
func (d *detached) run(flags uint8, buf []byte) []byte {
	s := d.s
	e := s.e
	if flags&flagGone != 0 {
		s.SetEnd(EndClientGone)
		d.end()
		return buf
	}
	select {
	case <-s.kicked:
		s.mu.Lock()
		gap := s.gap
		d.endWhy, d.farewell = s.gapWhy, s.farewell
		s.mu.Unlock()
		if !gap {
			e.log.Debug("mercure: subscriber too slow, disconnected", "client", s.client)
			d.end()
			return buf
		}
		d.ending = true
	default:
	}
	if e.stopped() || flags&flagExpired != 0 {
		// A clean end: the client resumes with Last-Event-ID.
		d.closing = true
		if e.stopped() {
			s.SetEnd(EndShutdown)
		} else {
			s.SetEnd(s.expiryWhy)
		}
	}
	// The timers' flags are taken in, whatever happens next: each timer
	// fires once per arming.
	now := time.Now()
	keepAlive := false
	if flags&flagKeepAlive != 0 {
		if idle := now.Sub(d.lastWrite); idle < e.cfg.KeepAlive {
			d.keepAlive.Reset(e.cfg.KeepAlive - idle)
		} else {
			keepAlive = true
		}
	}
	if flags&flagDelayOver != 0 {
		d.delayArmed = false
	}
	if d.inFlight.Load() {
		// Its goroutine schedules d once the write is done. Bytes are
		// on their way: no keep-alive needed.
		if keepAlive {
			d.keepAlive.Reset(e.cfg.KeepAlive)
		}
		return buf
	}
	if d.writeErr != nil {
		d.end()
		return buf
	}
	if len(d.pending) > 0 {
		// The write timeout counts from the last progress: a stream cut
		// for it made none for that long.
		if now.Sub(d.progress) >= e.cfg.WriteTimeout {
			d.end()
			return buf
		}
		if err := d.flush(); err != nil {
			d.end()
			return buf
		}
		if len(d.pending) > 0 {
			if keepAlive { // bytes wait to go out: no comment needed
				d.keepAlive.Reset(e.cfg.KeepAlive)
			}
			if flags&flagStalled != 0 {
				d.stall.Reset(time.Until(d.progress.Add(e.cfg.WriteTimeout)))
			}
			return buf
		}
	}
	if d.final {
		d.end()
		return buf
	}
	if d.closing {
		d.final = true
		buf, err := d.send(append(buf[:0], lastChunk...))
		if err != nil || d.done() {
			d.end()
		}
		return buf
	}

	if delay := e.cfg.WriteDelay; delay > 0 && !d.ending && !keepAlive && flags&flagUrgent == 0 {
		if d.delayArmed {
			return buf // the updates go out when the delay ends
		}
		if wait := d.lastWrite.Add(delay).Sub(now); wait > 0 && s.pending() {
			d.delayArmed = true
			if d.delay == nil {
				d.delay = time.AfterFunc(wait, func() { e.lm.schedule(d, flagDelayOver) })
			} else {
				d.delay.Reset(wait)
			}
			return buf
		}
	}

	batch := s.take(d.spare)
	n := 0
	for _, ev := range batch {
		if ev.Seq > d.minSeq { // else already sent by the replay
			n += len(ev.Bytes)
		}
	}
	if d.ending {
		n += len(d.farewell)
	}
	comment := n == 0 && keepAlive // events keep the stream alive as well
	if comment {
		n = len(keepAliveComment)
	}
	// Sized up front: a large batch is copied once, never regrown.
	if size := n + 20 + len(lastChunk); cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	buf = buf[:0]
	if n > 0 { // one chunk; never an empty one, which would end the body
		buf = strconv.AppendInt(buf, int64(n), 16)
		buf = append(buf, "\r\n"...)
		if comment {
			buf = append(buf, keepAliveComment...)
		}
		for _, ev := range batch {
			if ev.Seq > d.minSeq {
				buf = append(buf, ev.Bytes...)
				s.sampleDelay(ev)
			}
		}
		if d.ending {
			buf = append(buf, d.farewell...)
		}
		buf = append(buf, "\r\n"...)
	}
	clear(batch) // an idle stream pins no event
	d.spare = batch[:0]
	if d.ending {
		buf = append(buf, lastChunk...)
		d.final = true
		s.SetEnd(d.endWhy)
	}
	if len(buf) > 0 {
		var err error
		if buf, err = d.send(buf); err != nil {
			d.end()
			return buf
		}
	}
	if n > 0 {
		d.lastWrite = time.Now()
	}
	if keepAlive {
		d.keepAlive.Reset(e.cfg.KeepAlive)
	}
	if d.final && d.done() {
		d.end()
	}
	return buf
}

// lastChunk ends a chunked body.
const lastChunk = "0\r\n\r\n"

// send writes b, the next bytes of the body. On a socket, it writes what
// the connection takes now and keeps the rest pending, to be written when
// the connection can take more (see flush); otherwise it hands b to a
// goroutine that writes it under the write timeout (see offload). It
// returns the buffer the writer keeps for its next streams: b, or nil
// when d keeps b.
func (d *detached) send(b []byte) ([]byte, error) {
	if d.sock == nil {
		d.pending = b
		d.offload()
		return nil, nil
	}
	n, err := writeNow(d.sock, b)
	if err != nil {
		return b, err
	}
	if n < len(b) {
		// The stall clock starts now: the write timeout is for making no
		// progress at all, not for writing the whole chunk.
		// d keeps b: no copy of a large batch.
		d.pending = b[n:]
		d.progress, d.backoff = time.Now(), 0
		if timeout := d.s.e.cfg.WriteTimeout; d.stall == nil {
			lm := &d.s.e.lm
			d.stall = time.AfterFunc(timeout, func() { lm.schedule(d, flagStalled) })
		} else {
			d.stall.Reset(timeout)
		}
		d.waitRoom()
		return nil, nil
	}
	return b, nil
}

// flush writes what the connection takes now of d.pending: all of it, or
// the rest waits for room again.
func (d *detached) flush() error {
	n, err := writeNow(d.sock, d.pending)
	if err != nil {
		return err
	}
	if n > 0 {
		d.progress, d.backoff = time.Now(), 0
	}
	if n < len(d.pending) {
		d.pending = d.pending[n:]
		d.waitRoom()
		return nil
	}
	d.pending = nil
	d.stall.Stop()
	if d.retry != nil {
		d.retry.Stop()
	}
	if d.outArmed {
		d.outArmed = false
		_ = d.poller.watch(d, false) // fails once conn is closed only
	}
	return nil
}

// waitRoom schedules d when its connection can take more: the poller
// says when, or else a timer retries, with a backoff.
func (d *detached) waitRoom() {
	if d.poller != nil && d.poller.watch(d, true) == nil {
		d.outArmed = true
		return
	}
	d.backoff = min(max(2*d.backoff, retryMin), retryMax)
	if d.retry == nil {
		lm := &d.s.e.lm
		d.retry = time.AfterFunc(d.backoff, func() { lm.schedule(d, flagWritable) })
	} else {
		d.retry.Reset(d.backoff)
	}
}

// done reports whether every byte sent was written.
func (d *detached) done() bool {
	return !d.inFlight.Load() && len(d.pending) == 0
}

// offload writes d.pending on a goroutine of its own, where the
// connection is not a plain socket (TLS): a write there cannot be tried
// without blocking, and a TLS write that times out breaks the connection
// for good. The goroutine lives as long as the write, bounded by the
// write timeout as in stream.write; it then schedules d, which the writer
// ends if the write failed.
func (d *detached) offload() {
	lm := &d.s.e.lm
	d.inFlight.Store(true)
	lm.wg.Add(1)
	go func() {
		defer lm.wg.Done()
		d.writeErr = d.write(d.pending)
		d.pending = nil
		d.inFlight.Store(false)
		lm.schedule(d, flagWritable)
	}()
}

// write writes b to the connection under a write deadline, as
// stream.write does through the ResponseWriter.
func (d *detached) write(b []byte) error {
	s := d.s
	now := time.Now()
	if timeout := s.e.cfg.WriteTimeout; s.deadline.Sub(now) < timeout/2 {
		if err := s.extendDeadline(now.Add(timeout)); err != nil {
			return err
		}
	}
	_, err := d.conn.Write(b)
	return err
}

// end closes the connection of d and cleans up after its stream, once:
// only the writer running d (or detach) calls it.
func (d *detached) end() {
	lm := &d.s.e.lm
	lm.mu.Lock()
	d.state = stateEnded
	lm.mu.Unlock()
	d.keepAlive.Stop()
	if d.expiry != nil {
		d.expiry.Stop()
	}
	if d.delay != nil {
		d.delay.Stop()
	}
	if d.stall != nil {
		d.stall.Stop()
	}
	if d.retry != nil {
		d.retry.Stop()
	}
	if d.poller != nil {
		d.poller.remove(d) // before Close: its descriptor may be reused
	}
	if t, ok := d.conn.(*tls.Conn); ok {
		// Not t.Close: its close_notify alert could wait for a peer that
		// stopped reading, for seconds, on a writer. A write on its
		// goroutine fails at once.
		t.NetConn().Close()
	} else {
		d.conn.Close()
	}
	lm.mu.Lock()
	delete(lm.streams, d.id)
	var p *poller
	if len(lm.streams) == 0 {
		// No stream left: the poller and the idle writers exit.
		p, lm.poller = lm.poller, nil
		for ; lm.idle > 0; lm.idle-- {
			lm.wake <- struct{}{}
		}
	}
	lm.mu.Unlock()
	if p != nil {
		p.stop()
	}
	d.s.failed(nil)
	d.s.e.close(d.s, true)
}

// read watches d's connection with a goroutine blocked reading it, where
// no poller can: an SSE client sends nothing once its request is sent, so
// that a read returns when it leaves.
func (lm *lowMem) read(d *detached) {
	lm.wg.Add(1)
	go func() {
		defer lm.wg.Done()
		var b [1]byte
		_, _ = d.conn.Read(b[:])
		lm.gone(d.id)
	}()
}

// wait waits for the goroutines of the detached streams to exit, once
// every stream has ended (Shutdown).
func (lm *lowMem) wait() { lm.wg.Wait() }

// errNoPoller says that the system has no poller: streams are read.
var errNoPoller = errors.New("no connection poller on this system")

// rawConn returns the system connection under c, through TLS.
func rawConn(c net.Conn) (syscall.RawConn, error) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("the connection has no file descriptor")
	}
	return sc.SyscallConn()
}
