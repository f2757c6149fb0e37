package engine

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Spec describes a stream for [Engine.Serve].
type Spec struct {
	// Owner is the hub's side of the stream.
	Owner Subscriber
	// Client is the key its connection counts under (SUB-12).
	Client string
	// Anonymous says that no token or session authorized it: anonymous
	// streams draw on their own share of the engine's budgets.
	Anonymous bool
	// Expiry is when it must end at the latest (zero for never), and
	// ExpiryWhy why.
	Expiry    time.Time
	ExpiryWhy EndReason
	// Matchers select its events. Their URL patterns are replaced by the
	// index's interned copies once the stream is registered.
	Matchers []Matcher
	// Opened, if not nil, is called once the stream is registered,
	// before any byte of it is written: from then on it gets every event
	// pushed that its matchers select, and s ends it (see [Stream.End]).
	Opened func(s *Stream)
	// Started, if not nil, is called once the stream's headers and
	// history are flushed, before its live events.
	Started func()
	// Replay, when not nil, writes the history the stream resumes from
	// (REC-4) through rp, once the stream is registered: the live events
	// queue up meanwhile, and those up to the returned minSeq are dropped
	// as replayed, so that the seam has neither gap nor duplicate. A
	// Replay that returns false ends the stream there, for the reason it
	// gave [Replay.End] if any: if it has written nothing through rp, it
	// has answered the request itself (a refusal), and the engine writes
	// nothing.
	Replay func(rp *Replay) (minSeq uint64, ok bool)
}

// Serve runs the stream that spec describes, for r answered through w,
// from its registration to its end:
//
//   - it registers the stream, or returns why it refuses it (ErrClosed,
//     ErrTooManyStreams, ErrTooManyFromClient, ErrTooManyAnonymous,
//     ErrTooManyAnonymousFromClient, an error wrapping ErrPatterns)
//     having written nothing, for the caller to answer;
//   - it calls Spec.Opened, then writes the event stream's
//     headers and the history (Spec.Replay), or else the stream's starting
//     position (an id with no data, which a client keeps as its last
//     event id), and flushes;
//   - it calls Spec.Started, then writes live events until
//     the client leaves, the stream ends or the engine stops; an HTTP/1.1
//     connection may be taken over from net/http (Config.Detach), and its
//     stream then goes on after Serve returns.
//
// Once the stream is registered, Serve returns nil; or an error wrapping
// [ErrNotStarted] when the stream ended before any byte of it was
// written (its queue overflowed, or the engine stopped, while it was
// being set up), for the caller to answer the request (a temporary
// refusal: the stream did not start, and counts in neither
// Counters.StreamsOpened nor StreamsClosed); or the error of the first
// flush when the response cannot be flushed (http.ErrNotSupported:
// middleware without Unwrap?), the stream then ended. The owner's Ended
// runs once the stream has ended, whatever happened.
func (e *Engine) Serve(w http.ResponseWriter, r *http.Request, spec Spec) error {
	s := e.newStream(w, spec)
	if err := e.open(s, spec.Matchers); err != nil {
		return err
	}
	if spec.Opened != nil {
		spec.Opened(s)
	}
	minSeq, err := s.setUp(r, spec.Replay)
	if err != nil {
		e.close(s, r, false)
		switch {
		case errors.Is(err, errNotStarted):
			return s.notStarted()
		case errors.Is(err, errEnded):
			return nil
		}
		return err
	}
	if spec.Started != nil {
		spec.Started()
	}
	s.serve(r, minSeq)
	return nil
}

// errEnded is what setUp returns for a stream that ends before its live
// events: a replay that failed, a write that failed; errNotStarted what
// a write returns, and setUp, when the stream was aborted before its
// headers were written.
var (
	errEnded      = errors.New("stream ended before its live events")
	errNotStarted = errors.New("stream aborted before its headers")
)

// notStarted is what Serve returns for s, which was aborted before its
// headers were written (see errNotStarted).
func (s *Stream) notStarted() error {
	s.mu.Lock()
	why := s.why
	s.mu.Unlock()
	if why == EndQueueOverflow {
		return fmt.Errorf("%w: %w", ErrNotStarted, ErrBehind)
	}
	return fmt.Errorf("%w: %w", ErrNotStarted, ErrClosed) // AbortAll
}

// newStream returns the stream of spec, written to w. It is not
// registered yet: see open.
func (e *Engine) newStream(w http.ResponseWriter, spec Spec) *Stream {
	s := &Stream{
		e:         e,
		owner:     spec.Owner,
		client:    spec.Client,
		anonymous: spec.Anonymous,
		expiryWhy: spec.ExpiryWhy,
		h:         &handler{w: w, rc: http.NewResponseController(w), wakeCh: make(chan struct{}, 1)},
	}
	if !spec.Expiry.IsZero() {
		s.timersFor().expiryAt = spec.Expiry
	}
	s.lastWrite.Store(time.Now().UnixNano())
	// SUB-17: the host server's WriteTimeout would cut the stream; each
	// write gets its own deadline instead. Cleared before the stream is
	// registered, so that it cannot undo an abort.
	if err := s.h.rc.SetWriteDeadline(time.Time{}); errors.Is(err, http.ErrNotSupported) && e.warnedDeadlines.CompareAndSwap(false, true) {
		e.log.Warn("mercure: the response writer cannot set write deadlines (middleware without Unwrap?): streams stuck on a stalled client cannot be cut, and Shutdown may wait for them")
	}
	return s
}

// setUp writes the stream's headers and its history, or its starting
// position, and flushes; it returns the highest Seq the history covered.
// It returns errNotStarted when the stream was aborted before its
// headers were written, errEnded when it ended otherwise meanwhile, the
// flush's error when the response cannot be flushed.
func (s *Stream) setUp(r *http.Request, replay func(*Replay) (uint64, bool)) (minSeq uint64, err error) {
	s.detachable = s.e.detachable(s.h.w, r)
	if replay != nil {
		rp := &Replay{s: s}
		var ok bool
		if minSeq, ok = replay(rp); !ok || rp.err != nil {
			if errors.Is(rp.err, errNotStarted) {
				return 0, errNotStarted
			}
			return 0, errEnded
		}
	} else if err := s.write(positionBlock(s.h.start.ID)); err != nil {
		if errors.Is(err, errNotStarted) {
			return 0, errNotStarted
		}
		return 0, errEnded
	}
	if err := s.flush(); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			return 0, err
		}
		return 0, errEnded
	}
	s.lastWrite.Store(time.Now().UnixNano())
	return minSeq, nil
}

// positionBlock is the SSE block that sets a client's last event id to
// id without dispatching an event (HTML § Interpreting an event stream:
// an event with an empty data buffer is not fired, its id is kept), so
// that a stream cut before its first event resumes where it started
// rather than miss, silently, what was published meanwhile. The trade-off:
// EventSource takes the id only at the block's empty line, and parsers
// that dispatch every block, data or not (@microsoft/fetch-event-source),
// report that block as a message with empty data; no form does both
// (a comment sets no id). docs/embedding.md tells their users to skip it.
func positionBlock(id string) []byte {
	return append(append([]byte("id: "), id...), "\n\n"...)
}

// writeHeader sends the event stream's status and headers (SUB-14: at
// once, however long what follows takes), unless they are sent already.
// A stream aborted before then never starts: writeHeader then writes
// nothing and returns errNotStarted, and the request is answered as a
// refusal (see Engine.Serve). From the moment it commits to the headers,
// the stream counts as opened.
func (s *Stream) writeHeader() error {
	if s.headerSent { // the handler alone sets it
		return nil
	}
	s.mu.Lock()
	if s.state == stateAborted {
		s.mu.Unlock()
		return errNotStarted
	}
	s.headerSent = true
	s.mu.Unlock()
	s.e.counters.StreamsOpened.Add(1)
	hdr := s.h.w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // ask proxies not to buffer the stream
	if s.detachable {
		hdr.Set("Connection", "close") // the engine keeps the connection
	}
	s.h.w.WriteHeader(http.StatusOK)
	return nil
}

// Replay is a stream's writer while its history is written (see
// [Spec].Replay): its first write or flush sends the event stream's
// headers, after those the replay set on Header.
type Replay struct {
	s   *Stream
	err error // the first write's or flush's
}

// Header is the response's header, to set before the first write.
func (rp *Replay) Header() http.Header { return rp.s.h.w.Header() }

// Start returns the position of the last event recorded when the stream
// registered: the events after it are live for the stream.
func (rp *Replay) Start() Position { return rp.s.h.start }

// Write writes b, under a write deadline.
func (rp *Replay) Write(b []byte) error {
	if rp.err == nil {
		rp.err = rp.s.write(b)
	}
	return rp.err
}

// End records why the stream is to end, unless that is known already:
// the replay then returns false.
func (rp *Replay) End(why EndReason) { rp.s.setEnd(why) }

// Flush flushes what was written.
func (rp *Replay) Flush() error {
	if rp.err == nil {
		rp.err = rp.s.flush()
	}
	return rp.err
}
