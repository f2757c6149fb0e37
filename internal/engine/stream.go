package engine

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/sse"
)

// A Subscriber is the hub's side of a stream.
type Subscriber interface {
	// ReadsPrivate reports whether the stream may receive the private
	// event ev (AUTH-35). Only the dispatcher calls it, one event at a
	// time.
	ReadsPrivate(ev *Event) bool
	// Ended is called once the stream has ended and left the index: it
	// must not block, and returns what may (announcing the end to a
	// store), or nil. The engine runs that before it frees the stream's
	// connection slot, on a goroutine of its own for a detached stream.
	Ended() (later func())
}

// state is where a stream is in its life. A stream moves forward only:
//
//	open ──End, expiry, Stop──▶ ending ──last bytes written──▶ finished
//	  │                           │
//	  └──overflow, write error, client gone, AbortAll──▶ aborted ──▶ finished
//
// An open stream takes events and writes them. An ending one takes no
// more: it writes what it holds, then its farewell (a drain's retry
// field), then ends its response cleanly, so that its client resumes
// with Last-Event-ID. An aborted one writes nothing more: its writes are
// cut and its connection closed. A finished one has left the index and
// freed its slot. The first reason given for leaving open is the reason
// the stream ended.
type state uint8

const (
	stateOpen state = iota
	stateEnding
	stateAborted
	stateFinished
)

// Why a stream's writer is woken, besides its queue; they accumulate
// until its next step.
const (
	flagUrgent    uint8 = 1 << iota // the queue is half full: no write delay
	flagKeepAlive                   // the stream may have been idle for the keep-alive interval
	flagExpired                     // the token or the maximum lifetime ended
	flagGone                        // the client left (or sent something)
	flagDelayOver                   // the write delay ended
	flagWritable                    // the connection can take more, or a write on a goroutine ended
	flagStalled                     // the connection may have taken nothing for the write timeout
)

// Stream is one subscriber connection.
type Stream struct {
	// The fields dispatch touches for every delivery come first, so that
	// a fan-out to many streams reads few cache lines of each.
	e     *Engine
	owner Subscriber
	// lastSeq is the last event offered to this stream (SUB-13: at most
	// once per stream), or recorded before it opened: the dispatcher alone
	// touches it once the stream is registered.
	lastSeq uint64
	// wakePending is whether the dispatcher is to wake the writer (the
	// dispatcher alone touches it).
	wakePending bool
	// regShard is the shard of the engine's registry that holds the
	// stream, regSlot (below) its place there (see registry). They fill
	// room the alignment of their neighbours leaves.
	regShard uint8
	// interested is whether its matchers count in the interest (under
	// e.interest.mu).
	interested bool
	// detached is set once the engine runs the stream's connection: its
	// writer is then the shared pool, not its own goroutine.
	detached atomic.Bool
	sched    atomic.Uint32 // see writers.go
	// delaySample counts the events written, to sample their delay (the
	// writer alone touches it).
	delaySample uint32
	// writing is when the goroutine writer's current write began (unix
	// nanoseconds), 0 between writes: a stalled write shows (see shed).
	writing atomic.Int64

	mu    sync.Mutex
	state state
	why   EndReason // why it left open; EndUnset until then
	flags uint8
	// blocked is whether a detached stream waits for its connection to
	// take what it was sent: events then only queue, and its writer runs
	// when the connection can take more.
	blocked bool
	// The small fields share a word (an idle stream's size counts).
	delayArmed bool      // events wait for the write delay
	anonymous  bool      // see StreamConfig
	expiryWhy  EndReason // why the stream ends at its expiry (see armExpiry)
	counted    bool      // the stream's end is in the counters (the writer alone touches it)
	detachable bool      // the connection is to be taken over once set up (the handler alone touches it)
	// live is whether the stream is past its set-up (headers and replay):
	// its writer now writes its queue. Until then, its queue's bound is
	// hard (see enqueue).
	live bool
	// headerSent is whether the stream started: its status and headers
	// are written; flushed whether they went out (the first flush). Both
	// are set by the handler under mu. Until flushed, an overflow does not
	// cut the handler's writes (see cut).
	headerSent, flushed bool
	regSlot             int32
	// queue holds the events waiting to be written, queueBytes their
	// size; inflight holds the events the writer took and has not fully
	// written yet, inflightBytes their size. The limits count both.
	queue         []*Event
	queueBytes    int
	inflight      []*Event
	inflightBytes int
	farewell      []byte // ending: written last (a drain's retry field)
	// h is what the stream's handler holds; nil once detached.
	h *handler
	// deadline is the write deadline set last, by the writer, in unix
	// nanoseconds (0: none).
	deadline int64
	// sending is when the writer took what it is writing now (see step),
	// in unix nanoseconds; 0 once that is written.
	sending int64
	// conns is a detached stream's connection (rc and w are then nil),
	// set under mu when it is taken over; then its writer alone touches
	// what it points to, but for the connection itself.
	conns *connState

	entries   []*index.Entry[*Stream]
	client    string       // connection-limit key
	minSeq    uint64       // events up to here were replayed
	lastWrite atomic.Int64 // unix nanoseconds of the last bytes written, for keep-alives

	// The writer alone touches these.
	spare  []*Event
	timers *streamTimers // lazily: most streams need none
}

// handler is what a stream holds while its handler runs: a detached
// stream lets go of it.
type handler struct {
	rc     *http.ResponseController // nil once the stream is finished
	w      http.ResponseWriter      // nil once the stream is finished
	wakeCh chan struct{}            // the goroutine writer's
	start  Position                 // see Stream.Start
}

// streamTimers are the timers a stream arms only when it needs them, and
// the times they count from.
type streamTimers struct {
	expiry, delay, stall, retry *time.Timer
	// expiryAt is when the stream must end at the latest (zero for
	// never); lastEvents when events were last written, with a write
	// delay, which counts from it.
	expiryAt, lastEvents time.Time
}

func (t *streamTimers) stop() {
	for _, tm := range []*time.Timer{t.expiry, t.delay, t.stall, t.retry} {
		if tm != nil {
			tm.Stop()
		}
	}
}

// enqueue queues ev for the stream's writer without blocking. It
// returns the bytes it queued, false when the stream ended for overflow
// instead (its client will resume from history with Last-Event-ID), and
// whether the writer is to be woken. now is the dispatch's time.
//
// A queue past its bound (Limits.QueueEvents, Limits.QueueBytes, events
// in flight included) blames its stream only when the stream is behind by
// its own connection (see behindLocked): a stream whose writer has not
// reached it yet, in a burst that the writers take time to spread over
// many streams, or whose connection takes what it is handed, keeps its
// events past its bound. The queues' budget bounds what they all hold
// then: past it, this hub's publishers and the dispatcher wait for the
// writers, and the stalled streams are shed (see shed, WaitRoom). Until
// the stream is live (its headers and replay written by its handler,
// which is not its writer), the bound is hard: a stream that cannot start
// is refused (see Serve), and one that is replaying history is behind by
// that history.
func (s *Stream) enqueue(ev *Event, now int64) (queued int, ok, wake bool) {
	lim := &s.e.cfg.Limits
	s.mu.Lock()
	if s.state != stateOpen {
		// Ending, aborted, or finished since the dispatcher looked the
		// index up.
		s.mu.Unlock()
		return 0, true, false
	}
	// A stream with nothing unsent takes any event, however large:
	// refusing it would drop every stream it matches, and they would all
	// reconnect to replay it.
	n := len(ev.Bytes)
	if unsent := len(s.queue) + len(s.inflight); unsent > 0 &&
		(unsent >= lim.QueueEvents || s.queueBytes+s.inflightBytes+n > lim.QueueBytes) &&
		(!s.live || s.behindLocked(now)) {
		s.abortLocked(EndQueueOverflow)
		s.mu.Unlock()
		return 0, false, false
	}
	s.queue = append(s.queue, ev)
	s.queueBytes += n
	if s.e.cfg.WriteDelay > 0 && (2*(len(s.queue)+len(s.inflight)) >= lim.QueueEvents || 2*(s.queueBytes+s.inflightBytes) >= lim.QueueBytes) {
		// A write delay must not let the queue overflow: write now.
		s.flags |= flagUrgent
		wake = true
	}
	// A stream blocked on its connection is woken when the connection can
	// take more, not for each event.
	wake = wake || !s.blocked
	s.mu.Unlock()
	return n, true, wake
}

// signal records why the stream's writer is woken, and wakes it.
func (s *Stream) signal(flags uint8) {
	s.mu.Lock()
	s.flags |= flags
	s.mu.Unlock()
	s.wake()
}

// wake tells the stream's writer that it has something to do: its
// goroutine, or for a detached stream the writers' pool.
func (s *Stream) wake() {
	if s.detached.Load() {
		s.e.writers.schedule(s)
		return
	}
	var ch chan struct{} // nil once detached: the writers' pool is woken
	s.mu.Lock()
	if s.h != nil {
		ch = s.h.wakeCh
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// written records that the writer wrote what it took (or gave it up):
// its events no longer count against the limits.
func (s *Stream) written() {
	s.mu.Lock()
	evs := s.inflight
	s.inflight, s.inflightBytes, s.sending = nil, 0, 0
	s.mu.Unlock()
	s.e.unqueue(evs)
}

// End makes s write what it holds, then farewell (if not nil), and end
// cleanly for why; it takes no more events. The client resumes from its
// last event with Last-Event-ID.
func (s *Stream) End(why EndReason, farewell []byte) {
	s.mu.Lock()
	if s.state != stateOpen {
		s.mu.Unlock()
		return
	}
	s.state, s.why, s.farewell = stateEnding, why, farewell
	s.mu.Unlock()
	s.wake()
}

// abort cuts the stream's current and future writes at once, for why
// unless it ended for another reason already.
func (s *Stream) abort(why EndReason) {
	s.mu.Lock()
	s.abortLocked(why)
	s.cutLocked()
	s.mu.Unlock()
	s.wake()
}

// abortOpen is abort that reports whether s was still open, so that a
// caller counts only the streams it ended for why (one already ending
// keeps its reason, and its queue is freed all the same).
func (s *Stream) abortOpen(why EndReason) bool {
	s.mu.Lock()
	open := s.state == stateOpen
	s.abortLocked(why)
	s.cutLocked()
	s.mu.Unlock()
	s.wake()
	return open
}

// cut makes a write stuck on a peer that stopped reading fail at once:
// its deadline moves to the past. On HTTP/2 that is a message to the
// connection's goroutine: the caller holds no engine-wide lock. The
// dispatcher cuts the streams that overflowed, but for those whose status
// line is not out yet (its first flush): a cut then would leave the client
// without one, and the handler checks the stream's state before each
// write; one that finds it aborted before the headers answers the request
// itself (a refusal, see Serve). Shed and AbortAll cut whatever the
// stream's stage: its write is stuck, or the hub is stopping.
func (s *Stream) cut() {
	s.mu.Lock()
	if s.flushed || s.conns != nil {
		s.cutLocked()
	}
	s.mu.Unlock()
}

func (s *Stream) cutLocked() {
	if s.state != stateAborted {
		return
	}
	switch {
	case s.conns != nil:
		if s.conns.conn != nil { // else no write ever blocks
			_ = s.conns.conn.SetWriteDeadline(time.Now())
		}
	case s.h != nil && s.h.rc != nil:
		_ = s.h.rc.SetWriteDeadline(time.Now())
	}
}

// abortLocked moves s to the aborted state, for why unless it ended for
// another reason already; the caller holds s.mu, and cuts and wakes s
// after.
func (s *Stream) abortLocked(why EndReason) {
	switch s.state {
	case stateAborted, stateFinished:
		return
	case stateOpen:
		s.why = why
	}
	s.state = stateAborted
	// What the writer holds stays counted until it gives it up.
	s.e.unqueue(s.queue)
	s.queue, s.queueBytes = nil, 0
}

// started reports whether s has started: its headers are written.
func (s *Stream) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headerSent
}

// Ending reports whether s has left the open state.
func (s *Stream) Ending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state != stateOpen
}

// setEnd records why s ends, unless that is known already: a replay that
// failed, a write that timed out.
func (s *Stream) setEnd(why EndReason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why == EndUnset {
		s.why = why
	}
}

// finalReason settles why s ended, when nothing said so: the engine
// stopped, the client left (r, nil for a detached stream), or else a
// write failed. The caller holds s.mu.
func (s *Stream) finalReason(r *http.Request) EndReason {
	if s.why == EndUnset {
		switch {
		case s.e.stopped():
			s.why = EndShutdown
		case r != nil && r.Context().Err() != nil:
			s.why = EndClientGone
		default:
			s.why = EndWriteError
		}
	}
	return s.why
}

// sampleDelay samples the delivery delay of ev, just written to s: the
// first event written to s, then one in DelaySampleEvery.
func (s *Stream) sampleDelay(ev *Event) {
	if s.delaySample%DelaySampleEvery == 0 && !ev.Time.IsZero() {
		s.e.counters.DeliveryDelay.Observe(time.Since(ev.Time))
	}
	s.delaySample++
}

// flush flushes the response, as a write (see write).
func (s *Stream) flush() error {
	if err := s.writeHeader(); err != nil {
		return err
	}
	s.writing.Store(time.Now().UnixNano())
	err := s.h.rc.Flush()
	s.writing.Store(0)
	if err == nil && !s.flushed { // the handler alone sets it
		s.mu.Lock()
		s.flushed = true
		s.mu.Unlock()
	}
	return err
}

// write writes b under a write deadline, so that a peer that stopped
// reading cannot hold the stream's goroutine forever. Moving a deadline
// costs a timer update, so it is extended only once half of the write
// timeout has elapsed: a write may then fail after between half and all
// of the timeout.
//
// While a write is in progress, s.writing says since when: a write stuck
// on a client that stopped reading shows as a stall (see shed). b goes in
// pieces of writePiece at most, so that a client that takes a large
// update slowly shows its progress (see stuckLocked), as a detached
// stream's partial writes do.
func (s *Stream) write(b []byte) error {
	if err := s.writeHeader(); err != nil {
		return err
	}
	for len(b) > 0 {
		now := time.Now()
		if timeout := s.e.cfg.WriteTimeout; s.deadline-now.UnixNano() < int64(timeout/2) {
			if err := s.extendDeadline(now.Add(timeout)); err != nil {
				return err
			}
		}
		piece := b[:min(len(b), writePiece)]
		s.writing.Store(now.UnixNano())
		_, err := s.h.w.Write(piece)
		s.writing.Store(0)
		if err != nil {
			return err
		}
		b = b[len(piece):]
	}
	return nil
}

// writePiece is the most a goroutine writer writes in one call.
const writePiece = 64 << 10

// errAborted ends a stream whose writes were cut.
var errAborted = errors.New("stream aborted")

// extendDeadline moves the write deadline to d, unless the stream was
// aborted: its past deadline then stays.
func (s *Stream) extendDeadline(d time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateAborted || s.state == stateFinished {
		return errAborted
	}
	s.deadline = d.UnixNano()
	if s.conns != nil {
		if s.conns.conn == nil {
			return nil // no write on the descriptor ever blocks
		}
		return s.conns.conn.SetWriteDeadline(d)
	}
	if err := s.h.rc.SetWriteDeadline(d); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// armExpiry arms the timer that ends s at its expiry (AUTH-37: a stream
// ends no later than its token, and no later than the maximum lifetime).
func (s *Stream) armExpiry() {
	t := s.timers
	if t == nil || t.expiryAt.IsZero() {
		return
	}
	t.expiry = time.AfterFunc(time.Until(t.expiryAt), func() { s.signal(flagExpired) })
}

// timersFor returns the stream's timers, allocating them on first use.
// Only its writer calls it (and NewStream and Serve, before the writer
// starts).
func (s *Stream) timersFor() *streamTimers {
	if s.timers == nil {
		s.timers = new(streamTimers)
	}
	return s.timers
}

// close ends s for good: it settles why, unregisters it, runs its
// owner's clean-up and frees its slot; for a detached stream, on a
// goroutine of its own when the owner has work that may block.
func (e *Engine) close(s *Stream, r *http.Request, detached bool) {
	s.settle(r)
	s.mu.Lock()
	s.state = stateFinished
	queue, inflight := s.queue, s.inflight
	s.queue, s.queueBytes, s.inflight, s.inflightBytes = nil, 0, nil, 0
	if s.h != nil {
		s.h.w, s.h.rc = nil, nil
	}
	s.mu.Unlock()
	e.unqueue(queue)
	e.unqueue(inflight)
	if s.timers != nil {
		s.timers.stop()
	}
	e.unregister(s)
	later := s.owner.Ended()
	switch {
	case later == nil:
		e.release(s)
	case !detached:
		later()
		e.release(s)
	default:
		go func() {
			later()
			e.release(s)
		}()
	}
}

// settle counts the end of s in the counters, once, for the reason it
// ends (see finalReason): before its client can see the end, when the
// writer knows it in advance. A stream that never started (see
// Engine.Serve) is counted in neither StreamsOpened nor StreamsClosed.
func (s *Stream) settle(r *http.Request) {
	if s.counted {
		return
	}
	s.counted = true
	s.mu.Lock()
	why, started := s.finalReason(r), s.headerSent
	s.mu.Unlock()
	if started {
		s.e.counters.StreamsClosed[why].Add(1)
	}
}

// serve serves s once its headers (and its history, if any) are
// flushed: it writes queued events until the client leaves, the stream
// ends or the engine stops; events up to minSeq were replayed already. A
// detachable stream's connection is taken over: the stream goes on after
// serve returns, and cleans up after itself.
func (s *Stream) serve(r *http.Request, minSeq uint64) {
	s.minSeq = minSeq
	s.mu.Lock()
	s.live = true
	s.mu.Unlock()
	s.armExpiry()
	if s.detachable && s.e.detach(s) {
		return
	}
	s.run(r)
	s.e.close(s, r, false)
}

var (
	keepAliveComment = []byte(sse.KeepAlive)
	// lastChunk ends a chunked body.
	lastChunk = []byte("0\r\n\r\n")
	crlf      = []byte("\r\n")
)

// rawConn returns the system connection under c, through TLS.
func rawConn(c net.Conn) (syscall.RawConn, error) {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("the connection has no file descriptor")
	}
	return sc.SyscallConn()
}
