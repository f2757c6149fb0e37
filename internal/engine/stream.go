package engine

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
	lm          atomic.Pointer[detached]

	mu         sync.Mutex
	queue      []*Event
	queueBytes int
	overflowed bool          // the queue takes no more events: it overflowed, or gap
	gap        bool          // write the queue, then end (a feed gap, a drain)
	gapWhy     EndReason     // with gap: why the stream ends
	farewell   []byte        // with gap: written last (a drain's retry field)
	aborted    bool          // writes are cut: the deadline stays in the past
	finished   bool          // the stream has left the index: no more aborts
	ready      chan struct{} // signalled when queue becomes non-empty
	urgent     chan struct{} // with a write delay: signalled when the queue is half full
	kicked     chan struct{} // closed when overflowed is set

	entries []*index.Entry[*Stream]
	client  string // connection-limit key
	// expiry is when the stream must end at the latest (zero for never),
	// and expiryWhy why.
	expiry    time.Time
	expiryWhy EndReason
	w         http.ResponseWriter // while its handler runs
	rc        *http.ResponseController
	// conn is the connection of a detached stream, which lm runs; rc is
	// then nil. Both under mu.
	conn     net.Conn
	deadline time.Time // the write deadline set last, by the writer

	// endedBy is why the stream ended, set once by the goroutine serving
	// it (see failed); delaySample counts the events written, for
	// sampling the delivery delay (the writer alone touches both).
	endedBy     EndReason
	delaySample uint32
}

// NewStream returns a stream that writes to w for owner, counted against
// client's connections (SUB-12), ending at expiry at the latest (zero for
// never) for why. The stream is not registered yet: see [Engine.Open].
// deadlines is false when w cannot set write deadlines (middleware
// without Unwrap?): a stream stuck on a stalled client cannot be cut.
func (e *Engine) NewStream(w http.ResponseWriter, owner Subscriber, client string, expiry time.Time, why EndReason) (s *Stream, deadlines bool) {
	s = &Stream{
		e:         e,
		owner:     owner,
		client:    client,
		expiry:    expiry,
		expiryWhy: why,
		w:         w,
		rc:        http.NewResponseController(w),
		ready:     make(chan struct{}, 1),
		kicked:    make(chan struct{}),
	}
	if e.cfg.WriteDelay > 0 {
		s.urgent = make(chan struct{}, 1)
	}
	// SUB-17: the host server's WriteTimeout would cut the stream; each
	// write gets its own deadline instead. Cleared before the stream is
	// registered, so that it cannot undo an abort.
	err := s.rc.SetWriteDeadline(time.Time{})
	return s, !errors.Is(err, http.ErrNotSupported)
}

// enqueue queues ev for the stream's writer without blocking, unless the
// stream's queue is full or, with events queued already, ev would take
// more than room, what is left of Limits.MaxQueuedBytes. It returns the
// bytes it queued, and false when the queue is full: the stream is then
// kicked, and its client will resume from history with Last-Event-ID;
// the caller aborts it.
func (s *Stream) enqueue(ev *Event, room int64) (queued int, ok bool) {
	lim := &s.e.cfg.Limits
	s.mu.Lock()
	if s.overflowed || s.finished {
		// finished: closed since the dispatcher looked the index up.
		s.mu.Unlock()
		return 0, true
	}
	// An empty queue takes any event, however large: refusing it would
	// drop every stream it matches, and they would all reconnect to
	// replay it.
	n := len(ev.Bytes)
	if len(s.queue) > 0 && (len(s.queue) >= lim.QueueEvents || s.queueBytes+n > lim.QueueBytes || int64(n) > room) {
		// The caller then aborts s, to unblock a write stuck on the peer
		// that stopped reading.
		s.overflowed = true
		s.e.queued.Add(-int64(s.queueBytes))
		s.queue, s.queueBytes = nil, 0
		s.mu.Unlock()
		close(s.kicked)
		return 0, false
	}
	s.queue = append(s.queue, ev)
	s.queueBytes += n
	urgent := s.urgent != nil && (2*len(s.queue) >= lim.QueueEvents || 2*s.queueBytes >= lim.QueueBytes)
	s.mu.Unlock()
	// The dispatcher wakes the writer (see wake) once it has queued the
	// batch this event is part of.
	if urgent {
		// A write delay must not let the queue overflow: write now.
		select {
		case s.urgent <- struct{}{}:
		default:
		}
	}
	if d := s.lm.Load(); d != nil && urgent {
		s.e.lm.scheduleEvent(d, true)
	}
	return n, true
}

// wake tells the stream's writer that events are queued: its goroutine,
// or for a detached stream the writers' run queue.
func (s *Stream) wake() {
	if d := s.lm.Load(); d != nil {
		s.e.lm.scheduleEvent(d, false)
		return
	}
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take swaps the pending events with spare (emptied), so that the writer
// drains everything queued in one go and the two slices are reused.
func (s *Stream) take(spare []*Event) []*Event {
	if cap(spare) > 64 && len(spare) < cap(spare)/8 {
		spare = nil // a burst is over: give its memory back
	}
	clear(spare)
	s.mu.Lock()
	q, n := s.queue, s.queueBytes
	s.queue, s.queueBytes = spare[:0], 0
	s.mu.Unlock()
	s.e.queued.Add(-int64(n))
	return q
}

// pending reports whether events wait in the queue of s.
func (s *Stream) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) > 0
}

// abort makes the stream's current and future writes fail at once.
func (s *Stream) abort() {
	defer s.wakeDetached(0) // a detached stream sees why: kicked, shutdown
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = true
	switch {
	case s.finished:
	case s.conn != nil:
		_ = s.conn.SetWriteDeadline(time.Now())
	case s.rc != nil:
		_ = s.rc.SetWriteDeadline(time.Now())
	}
}

// End makes s write what is queued, then farewell (if not nil), and end
// for why; it takes no more events. The client resumes from its last
// event with Last-Event-ID.
func (s *Stream) End(why EndReason, farewell []byte) {
	defer s.wakeDetached(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overflowed {
		return
	}
	s.overflowed, s.gap, s.gapWhy, s.farewell = true, true, why, farewell
	close(s.kicked)
}

// Ending reports whether s has ended or is ending.
func (s *Stream) Ending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished || s.overflowed
}

// SetEnd records why s ended, unless that is known already. Only the
// goroutine serving s calls it.
func (s *Stream) SetEnd(why EndReason) {
	if s.endedBy == EndUnset {
		s.endedBy = why
	}
}

// failed records why s ended when its writes failed, unless that is
// known already; r is nil for a detached stream.
func (s *Stream) failed(r *http.Request) {
	if s.endedBy != EndUnset {
		return
	}
	s.mu.Lock()
	overflow := s.overflowed && !s.gap
	s.mu.Unlock()
	switch {
	case s.e.stopped():
		s.endedBy = EndShutdown
	case overflow:
		s.endedBy = EndQueueOverflow
	case r != nil && r.Context().Err() != nil:
		s.endedBy = EndClientGone
	default:
		s.endedBy = EndWriteError
	}
}

// sampleDelay samples the delivery delay of ev, just written to s: the
// first event written to s, then one in DelaySampleEvery.
func (s *Stream) sampleDelay(ev *Event) {
	if s.delaySample%DelaySampleEvery == 0 && !ev.Time.IsZero() {
		s.e.counters.DeliveryDelay.Observe(time.Since(ev.Time))
	}
	s.delaySample++
}

// Write writes b to the stream's response while its handler sets it up
// (a replay), under a write deadline.
func (s *Stream) Write(b []byte) error { return s.write(b) }

// Flush flushes the stream's response while its handler sets it up.
func (s *Stream) Flush() error { return s.rc.Flush() }

// write writes b under a write deadline, so that a peer that stopped
// reading cannot hold the stream's goroutine forever. Moving a deadline
// costs a timer update, so it is extended only once half of the write
// timeout has elapsed: a write may then fail after between half and all
// of the timeout.
func (s *Stream) write(b []byte) error {
	now := time.Now()
	if timeout := s.e.cfg.WriteTimeout; s.deadline.Sub(now) < timeout/2 {
		if err := s.extendDeadline(now.Add(timeout)); err != nil {
			return err
		}
	}
	_, err := s.w.Write(b)
	return err
}

// errAborted ends a stream whose writes were cut (overflow or shutdown).
var errAborted = errors.New("stream aborted")

func (s *Stream) extendDeadline(d time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aborted {
		return errAborted // keep the past deadline that aborted it
	}
	s.deadline = d
	if s.conn != nil {
		return s.conn.SetWriteDeadline(d)
	}
	if err := s.rc.SetWriteDeadline(d); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// Finish ends a stream that [Engine.Open] registered and that its
// handler does not serve (its replay failed, say): r is its request.
func (s *Stream) Finish(r *http.Request) {
	s.failed(r)
	s.e.close(s, false)
}

// close unregisters s once it has ended, runs its owner's clean-up and
// frees its slot; detached: on a goroutine of its own when the owner has
// work that may block.
func (e *Engine) close(s *Stream, detached bool) {
	e.counters.StreamsClosed[s.endedBy].Add(1)
	e.unregister(s)
	s.mu.Lock()
	s.finished = true
	e.queued.Add(-int64(s.queueBytes))
	s.queue, s.queueBytes = nil, 0
	s.w = nil
	s.mu.Unlock()
	later := s.owner.Ended()
	if later == nil {
		e.release(s)
		return
	}
	if !detached {
		later()
		e.release(s)
		return
	}
	go func() {
		later()
		e.release(s)
	}()
}

// Serve serves s once its headers (and its replay, if any) are flushed:
// it writes queued events until the client leaves, the stream ends or
// the engine stops; events up to minSeq were replayed already. A stream
// whose connection the engine takes over (see [Engine.Detachable]) goes
// on after Serve returns, and cleans up after itself.
func (s *Stream) Serve(r *http.Request, minSeq uint64, detach bool) {
	if detach && s.e.detach(s, minSeq) {
		return
	}
	s.run(r, minSeq)
	s.failed(r)
	s.e.close(s, false)
}

// run writes queued events until the client leaves, the stream is kicked or
// the engine stops.
func (s *Stream) run(r *http.Request, minSeq uint64) {
	e := s.e
	// The keep-alive timer is not reset on every write: when it fires
	// early it is re-armed for the rest of the idle interval.
	keepAlive := time.NewTimer(e.cfg.KeepAlive)
	defer keepAlive.Stop()
	// AUTH-37: a stream ends no later than its token, and no later than
	// the maximum lifetime.
	var expired <-chan time.Time
	if !s.expiry.IsZero() {
		t := time.NewTimer(time.Until(s.expiry))
		defer t.Stop()
		expired = t.C
	}
	var (
		lastWrite time.Time        // zero: the first update after connecting is not delayed
		delay     *time.Timer      // for WithWriteDelay
		waiting   <-chan time.Time // delay.C while updates wait for the delay
		spare     []*Event
	)
	ending := false // after a feed gap or in a drain: write what is queued, then end
	var (
		gapWhy   EndReason
		farewell []byte
	)
	for {
		select {
		case <-s.ready:
			if waiting != nil {
				continue // they will go out when the delay ends
			}
			if wait := time.Until(lastWrite.Add(e.cfg.WriteDelay)); wait > 0 {
				if delay == nil {
					delay = time.NewTimer(wait)
					defer delay.Stop()
				} else {
					delay.Reset(wait)
				}
				waiting = delay.C
				continue
			}
		case <-waiting: // more updates joined this write
			waiting = nil
		case <-s.urgent: // the queue is half full: write now
			if waiting == nil {
				continue
			}
			delay.Stop() // Go 1.23 timers: no stale tick is left to drain
			waiting = nil
		case <-keepAlive.C:
			if idle := time.Since(lastWrite); idle < e.cfg.KeepAlive {
				keepAlive.Reset(e.cfg.KeepAlive - idle)
				continue
			}
			if s.write(keepAliveComment) != nil || s.Flush() != nil {
				return
			}
			lastWrite = time.Now()
			keepAlive.Reset(e.cfg.KeepAlive)
			continue
		case <-s.kicked:
			s.mu.Lock()
			ending, gapWhy, farewell = s.gap, s.gapWhy, s.farewell
			s.mu.Unlock()
			if !ending {
				e.log.Debug("mercure: subscriber too slow, disconnected", "client", s.client)
				return
			}
		case <-expired:
			s.SetEnd(s.expiryWhy)
			return
		case <-r.Context().Done():
			return
		case <-e.ctx.Done():
			return
		}
		batch := s.take(spare)
		wrote := false
		for _, ev := range batch {
			if ev.Seq <= minSeq {
				continue // already sent by the replay
			}
			if err := s.write(ev.Bytes); err != nil {
				return
			}
			s.sampleDelay(ev)
			wrote = true
		}
		spare = batch
		if ending && farewell != nil {
			if err := s.write(farewell); err != nil {
				return
			}
			wrote = true
		}
		if wrote {
			if err := s.Flush(); err != nil {
				return
			}
			lastWrite = time.Now()
		}
		if ending {
			s.SetEnd(gapWhy)
			return
		}
	}
}

var keepAliveComment = []byte(sse.KeepAlive)

// Ready and Take are the pull side of a stream read in process rather
// than written to a connection (benchmarks measure the hub's own cost so):
// Ready signals that events were queued, and Take returns them all,
// swapped with spare (emptied) so that the two slices are reused.
func (s *Stream) Ready() <-chan struct{} { return s.ready }

// Take: see [Stream.Ready].
func (s *Stream) Take(spare []*Event) []*Event { return s.take(spare) }
