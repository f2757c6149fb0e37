package mercure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure/internal/form"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/sse"
	"github.com/mercurekit/mercure/internal/token"
)

// subscribeRequest is a parsed subscribe request.
type subscribeRequest struct {
	matchers  []matcher
	cursor    string // last event id
	hasCursor bool
}

// parseSubscribe reads the matchers and the cursor of a GET or QUERY
// request: the union of query and body pairs (SUB-3), parsed the WHATWG way
// (SUB-5). URL patterns are held to the limits of p's kind of client. In
// the compatibility mode, topic= pairs are matchers too (see
// [Hub.legacySelector]).
func (h *Hub) parseSubscribe(w http.ResponseWriter, r *http.Request, p *principal) (subscribeRequest, error) {
	var req subscribeRequest
	lim := &h.cfg.limits.Patterns
	if p == nil {
		lim = &h.cfg.limits.AnonymousPatterns
	}
	size := 0 // of the request's distinct URL patterns and templates
	pairs := form.Parse(r.URL.RawQuery)
	nquery := len(pairs)
	if r.Method == methodQuery && (r.ContentLength != 0 || r.Header.Get("Content-Type") != "") {
		body, err := h.readForm(w, r)
		if err != nil {
			return req, err
		}
		pairs = form.AppendParse(pairs, body)
	}
	var bodyCursor, aliasCursor string
	var hasBodyCursor, hasTopic bool
	aliasRank := len(resumeAliases)
	for i, pair := range pairs {
		if pair.Name == "last_event_id" {
			switch {
			case i < nquery && !req.hasCursor:
				req.cursor, req.hasCursor = pair.Value, true
			case i >= nquery && !hasBodyCursor:
				bodyCursor, hasBodyCursor = pair.Value, true
			}
			continue
		}
		if rank := slices.Index(resumeAliases[:], pair.Name); rank >= 0 {
			if i < nquery && rank < aliasRank {
				aliasCursor, aliasRank = pair.Value, rank
			}
			continue
		}
		var m matcher
		var cost index.Cost
		switch typ, ok, err := matcherType(pair.Name); {
		case err != nil:
			return req, err
		case ok:
			m, cost, err = h.newMatcher(typ, pair.Value, lim)
			if err != nil {
				return req, err
			}
		case pair.Name == "topic":
			hasTopic = true
			if h.cfg.legacy == nil {
				continue
			}
			m, cost, err = h.legacySelector(pair.Value, lim)
			if err != nil {
				return req, err
			}
		default:
			continue // not a matcher: ignored, access_token included (AUTH-9)
		}
		if len(req.matchers) == h.cfg.limits.MaxMatchers {
			return req, fmt.Errorf("%w: more than %d matchers", errMatcher, h.cfg.limits.MaxMatchers)
		}
		if m.kind.Evaluated() && !slices.ContainsFunc(req.matchers, m.same) {
			// The heap a request can pin is bounded, however many
			// patterns it spreads it over.
			if size += cost.Size; size > lim.MaxStreamSize {
				return req, fmt.Errorf("%w: %w: the URL patterns would compile to about %d instructions, more than %d", errMatcher, index.ErrCost, size, lim.MaxStreamSize)
			}
		}
		req.matchers = append(req.matchers, m)
	}
	if len(req.matchers) == 0 {
		if hasTopic {
			return req, fmt.Errorf("%w: no match parameter: this hub reads match (exact topics) and match_urlpattern (URL patterns), not the pre-standard topic parameter, which it accepts only in its compatibility mode: %s", errMatcher, legacyOption)
		}
		return req, fmt.Errorf("%w: no match parameter", errMatcher) // SUB-9
	}
	// Only a request found within every limit gets its patterns compiled.
	if err := h.compileMatchers(req.matchers, lim); err != nil {
		return req, err
	}
	// REC-3: the header beats the query, which beats the body; the
	// parameters of older clients come last (see resumeAliases).
	switch v, ok := r.Header["Last-Event-Id"]; {
	case ok && len(v) > 0:
		req.cursor, req.hasCursor = v[0], true
	case req.hasCursor:
	case hasBodyCursor:
		req.cursor, req.hasCursor = bodyCursor, true
	case aliasRank < len(resumeAliases):
		req.cursor, req.hasCursor = aliasCursor, true
	}
	return req, nil
}

// stream is one subscriber connection.
type stream struct {
	// The fields dispatch touches for every delivery come first, so that
	// a fan-out to many streams reads few cache lines of each.
	hub       *Hub
	principal *principal
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
	gapWhy     endReason     // with gap: why the stream ends
	farewell   []byte        // with gap: written last (a drain's retry field)
	aborted    bool          // writes are cut: the deadline stays in the past
	finished   bool          // the handler has returned: no more aborts
	ready      chan struct{} // signalled when queue becomes non-empty
	urgent     chan struct{} // with a write delay: signalled when the queue is half full
	kicked     chan struct{} // closed when overflowed is set

	matchers []matcher
	entries  []*index.Entry[*stream]
	client   string // connection-limit key
	// subscriber is the connection's random id and subscriptions its
	// active subscriptions, with WithSubscriptions (ACT).
	subscriber    string
	subscriptions []*Subscription
	// sessionReq is a copy of the request of a stream authorized by the
	// Authorizer, for its re-checks (set before recheck is armed), and
	// the timer of the next one, under mu.
	sessionReq *http.Request
	recheck    *time.Timer
	rc         *http.ResponseController
	// conn is the connection of a detached stream, which lm runs
	// (WithLowMemoryStreams); rc is then nil. Both under mu.
	conn     net.Conn
	deadline time.Time // the write deadline set last, by the writer

	// endedBy is why the stream ended, set once by the goroutine serving
	// it (see failed); delaySample counts the events written, for
	// sampling the delivery delay (the writer alone touches both).
	endedBy     endReason
	delaySample uint32
}

// enqueue queues e for the stream's writer without blocking, unless the
// stream's queue is full or, with events queued already, e would take
// more than room, what is left of [Limits.MaxQueuedBytes]. It returns the
// bytes it queued, and false when the queue is full: the stream is then
// kicked, and its client will resume from history with Last-Event-ID;
// the caller aborts it.
func (s *stream) enqueue(e *Event, room int64) (queued int, ok bool) {
	lim := &s.hub.cfg.limits
	s.mu.Lock()
	if s.overflowed || s.finished {
		// finished: closed since the dispatcher looked the index up.
		s.mu.Unlock()
		return 0, true
	}
	// An empty queue takes any event, however large: refusing it would
	// drop every stream it matches, and they would all reconnect to
	// replay it.
	n := len(e.encoded())
	if len(s.queue) > 0 && (len(s.queue) >= lim.QueueEvents || s.queueBytes+n > lim.QueueBytes || int64(n) > room) {
		// The caller then aborts s, to unblock a write stuck on the peer
		// that stopped reading.
		s.overflowed = true
		s.hub.queued.Add(-int64(s.queueBytes))
		s.queue, s.queueBytes = nil, 0
		s.mu.Unlock()
		close(s.kicked)
		return 0, false
	}
	s.queue = append(s.queue, e)
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
		s.hub.lm.scheduleEvent(d, true)
	}
	return n, true
}

// wake tells the stream's writer that events are queued: its goroutine,
// or for a detached stream the writers' run queue.
func (s *stream) wake() {
	if d := s.lm.Load(); d != nil {
		s.hub.lm.scheduleEvent(d, false)
		return
	}
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take swaps the pending events with spare (emptied), so that the writer
// drains everything queued in one go and the two slices are reused.
func (s *stream) take(spare []*Event) []*Event {
	if cap(spare) > 64 && len(spare) < cap(spare)/8 {
		spare = nil // a burst is over: give its memory back
	}
	clear(spare)
	s.mu.Lock()
	q, n := s.queue, s.queueBytes
	s.queue, s.queueBytes = spare[:0], 0
	s.mu.Unlock()
	s.hub.queued.Add(-int64(n))
	return q
}

// abort makes the stream's current and future writes fail at once.
func (s *stream) abort() {
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

// matches reports whether one of the stream's matchers selects one of e's
// topics and the stream may read e: the same rules as live dispatch,
// applied to replayed events with the principal presented now (REC-5).
func (s *stream) matches(e *Event) bool {
	if e.Private && !s.principal.mayRead(e, s.hub.resolver) {
		return false
	}
	for i := range s.matchers {
		if s.matchers[i].matchesEvent(e, s.hub.resolver) {
			return true
		}
	}
	return false
}

// serveSubscribe is the subscribe endpoint (SUB-1, SUB-2).
func (h *Hub) serveSubscribe(w http.ResponseWriter, r *http.Request) {
	// The span covers the request until its stream is open, not the
	// stream's life: a trace of hours helps no one, and a span held per
	// stream would cost memory per connection.
	ctx, span := r.Context(), noSpan
	if h.tracing() {
		ctx, span = h.tracer.Start(requestContext(r), spanSubscribe)
	}
	rw := &refusalWriter{ResponseWriter: w} // for the refusals' status
	setup := true
	endSetup := func(err error) {
		if setup {
			setup = false
			if rw.status != 0 {
				endSpanStatus(span, rw.status)
			} else {
				endSpan(span, err)
			}
		}
	}
	defer func() { endSetup(errNotOpened) }()
	if h.shutting.Load() && !h.isClosed() {
		serveDrained(rw) // a drain: come back soon, elsewhere
		return
	}
	if r.Method == methodQuery {
		h.limitBodyTime(w, r)
	}
	client := h.cfg.clientKey(r)
	if status, msg := h.refuse(client); status != 0 {
		writeProblem(rw, status, msg)
		return
	}
	// Authenticate first: a client the hub would refuse must not make it
	// parse a body or compile a pattern.
	p, ok := h.authenticate(rw, r, token.Subscriber)
	if !ok {
		return
	}
	if p == nil && h.authorizesSubscribers() && !h.cfg.anonymous {
		h.deny(rw, r, h.missingDenial(r), token.Subscriber, nil) // AUTH-2, AUTH-13
		return
	}
	if p != nil && !p.session && !time.Now().Before(p.expiry) {
		// Within the clock leeway, yet a stream must end by exp (AUTH-37):
		// it would not get a single event.
		h.deny(rw, r, denial{status: http.StatusUnauthorized, code: "invalid_token", reason: TokenExpired, description: h.describe(TokenExpired, "")}, token.Subscriber, nil)
		return
	}
	req, err := h.parseSubscribe(w, r, p)
	if err != nil {
		writeFormError(rw, err)
		return
	}
	if span.IsRecording() {
		span.SetAttributes(attrMatchers.Int(len(req.matchers)), attrAnon.Bool(p == nil))
	}
	s := &stream{
		hub:       h,
		matchers:  req.matchers,
		principal: p,
		client:    client,
		rc:        http.NewResponseController(w),
		ready:     make(chan struct{}, 1),
		kicked:    make(chan struct{}),
	}
	if h.cfg.writeDelay > 0 {
		s.urgent = make(chan struct{}, 1)
	}
	// SUB-17: the host server's WriteTimeout would cut the stream; each
	// write gets its own deadline instead. Cleared before the stream is
	// registered, so that it cannot undo an abort.
	if err := s.rc.SetWriteDeadline(time.Time{}); errors.Is(err, http.ErrNotSupported) && h.warnedDeadlines.CompareAndSwap(false, true) {
		h.log.WarnContext(ctx, "mercure: the response writer cannot set write deadlines (middleware without Unwrap?): streams stuck on a stalled client cannot be cut, and Shutdown may wait for them")
	}
	if status, msg := h.open(s); status != 0 {
		writeProblem(rw, status, msg)
		return
	}
	h.metrics.streamsOpened.Add(1)
	if p != nil && p.session {
		h.startRecheck(s, r) // instead of an expiry
	}
	detached := false // then the stream cleans up after itself when it ends
	defer func() {
		if !detached {
			h.close(s)
		}
	}()
	defer func() {
		if !detached {
			s.failed(r)
		}
	}()
	var started <-chan struct{}
	if h.subscriptionsStarted(s) {
		defer func() {
			if !detached {
				h.subscriptionsEnded(s, started)
			}
		}()
	}

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // ask proxies not to buffer the stream
	lowMem := h.lowMemoryFor(w, r)
	if lowMem {
		hdr.Set("Connection", "close") // the hub keeps the connection
	}
	var minSeq uint64 // queued events up to here were replayed
	if req.hasCursor {
		if minSeq, ok = h.replay(ctx, w, r, s, req.cursor); !ok {
			return
		}
	} else {
		w.WriteHeader(http.StatusOK)
	}
	if err := s.flush(); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			h.log.ErrorContext(ctx, "mercure: the response writer cannot flush; streams need http.Flusher")
		}
		return
	}
	endSetup(nil)
	// After the headers and the replay: the store's pace is not the
	// stream's (ACT-2).
	started = h.announceStarted(s)
	if lowMem && h.detach(w, s, minSeq, started) {
		detached = true
		return
	}
	s.run(w, r, minSeq)
}

// replay sends the retained events that follow cursor (REC-4) and returns
// the highest sequence it covered. The stream is already registered: live
// events queue up meanwhile, and run drops those the replay covered, so the
// seam has neither gap nor duplicate. ok is false when the stream must end.
//
// ctx is the request's, with the subscribe span.
func (h *Hub) replay(ctx context.Context, w http.ResponseWriter, r *http.Request, s *stream, cursor string) (minSeq uint64, ok bool) {
	ctx, span := h.startSpan(ctx, spanReplay, nil)
	replayed := 0
	var failure error
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attrReplayed.Int(replayed))
		}
		if !ok && failure == nil {
			failure = errNotOpened
		}
		endSpan(span, failure)
	}()
	var cancel context.CancelFunc
	if s.principal != nil && !s.principal.session { // AUTH-37: not a replayed event after exp
		ctx, cancel = context.WithDeadline(ctx, s.principal.expiry)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	defer context.AfterFunc(h.ctx, cancel)() // shutdown interrupts the replay
	// Replays read and filter history: only so many at once, each for a
	// bounded time, a slow client's included.
	h.metrics.replays.Add(1)
	if !h.acquireReplay(ctx) {
		if r.Context().Err() == nil {
			s.setEnd(endReplayError)
			failure = errNoReplaySlot
			writeProblem(w, http.StatusServiceUnavailable, "too many replays in progress")
		}
		return 0, false
	}
	defer func() { <-h.replays }()
	ctx, cancelReplay := context.WithTimeout(ctx, h.cfg.limits.ReplayTimeout)
	defer cancelReplay()
	sctx, sspan := h.startSpan(ctx, spanStoreReplay, nil)
	backlog, err := h.store.Replay(sctx, cursor)
	endSpan(sspan, err)
	switch {
	case err == nil:
	case h.ctx.Err() != nil:
		writeProblem(w, http.StatusServiceUnavailable, "the hub is shutting down")
		return 0, false
	case r.Context().Err() != nil:
		return 0, false // the client left
	default:
		h.metrics.storeErrors.Add(1)
		s.setEnd(endReplayError)
		failure = err
		h.reads.failed(ctx, h.log, slog.LevelWarn, "mercure: reading history fails; streams that resume get 503 until it recovers", err)
		writeProblem(w, http.StatusServiceUnavailable, "history is unavailable")
		return 0, false
	}
	h.reads.recovered(ctx, h.log, "mercure: reading history works again")
	w.Header().Set("Mercure-Last-Event-ID", backlog.Cursor) // REC-9: before the first byte
	w.WriteHeader(http.StatusOK)
	if err := s.flush(); err != nil { // SUB-14: headers at once, however long the replay
		return 0, false
	}
	minSeq = backlog.Head
	unflushed := 0
	for e, err := range backlog.Events {
		if err != nil || ctx.Err() != nil {
			switch {
			case err == nil || ctx.Err() != nil:
			case errors.Is(err, ErrHistoryGap):
				// Retention outran this replay, as a slow subscriber is
				// outrun: no failure of the store.
				s.setEnd(endHistoryGap)
				failure = err
				h.log.DebugContext(ctx, "mercure: history dropped events before the replay reached them; ending the stream so that the client resumes", "error", err)
			default:
				h.metrics.storeErrors.Add(1)
				s.setEnd(endReplayError)
				failure = err
				h.reads.failed(ctx, h.log, slog.LevelWarn, "mercure: reading history fails; streams that resume get 503 until it recovers", err)
			}
			if ctx.Err() != nil && r.Context().Err() == nil && h.ctx.Err() == nil {
				// The token expired, or the replay took too long.
				s.setEnd(s.expiryReason(endReplayError))
			}
			return 0, false // the client resumes from the last event it got
		}
		minSeq = max(minSeq, e.Seq)
		if !s.matches(e) {
			continue
		}
		b := e.encoded()
		if err := s.write(w, b); err != nil {
			return 0, false
		}
		h.metrics.replayed.Add(1)
		replayed++
		// Flush in large batches: a long replay costs few system calls, and
		// a slow store still lets the client make progress.
		if unflushed += len(b); unflushed >= replayFlushBytes {
			if err := s.flush(); err != nil {
				return 0, false
			}
			unflushed = 0
		}
	}
	return minSeq, true
}

// replayWait is how long a stream waits for a replay slot (see
// [Limits.MaxReplays]) before it gets 503; a variable for tests.
var replayWait = 5 * time.Second

// acquireReplay takes a replay slot, waiting for one up to replayWait; it
// reports false when none was free in time, or ctx ended first.
func (h *Hub) acquireReplay(ctx context.Context) bool {
	select {
	case h.replays <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(replayWait)
	defer t.Stop()
	select {
	case h.replays <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// replayFlushBytes is how much replayed data is written between flushes.
const replayFlushBytes = 32 << 10

// run writes queued events until the client leaves, the stream is kicked or
// the hub shuts down.
func (s *stream) run(w http.ResponseWriter, r *http.Request, minSeq uint64) {
	h := s.hub
	// The keep-alive timer is not reset on every write: when it fires
	// early it is re-armed for the rest of the idle interval.
	keepAlive := time.NewTimer(h.cfg.keepAlive)
	defer keepAlive.Stop()
	// AUTH-37: a stream ends no later than its token, and no later than
	// the maximum lifetime.
	end, endWhy := s.end()
	var expired <-chan time.Time
	if !end.IsZero() {
		t := time.NewTimer(time.Until(end))
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
		gapWhy   endReason
		farewell []byte
	)
	for {
		select {
		case <-s.ready:
			if waiting != nil {
				continue // they will go out when the delay ends
			}
			if wait := time.Until(lastWrite.Add(h.cfg.writeDelay)); wait > 0 {
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
			if idle := time.Since(lastWrite); idle < h.cfg.keepAlive {
				keepAlive.Reset(h.cfg.keepAlive - idle)
				continue
			}
			if s.write(w, keepAliveComment) != nil || s.flush() != nil {
				return
			}
			lastWrite = time.Now()
			keepAlive.Reset(h.cfg.keepAlive)
			continue
		case <-s.kicked:
			s.mu.Lock()
			ending, gapWhy, farewell = s.gap, s.gapWhy, s.farewell
			s.mu.Unlock()
			if !ending {
				h.log.Debug("mercure: subscriber too slow, disconnected", "client", s.client)
				return
			}
		case <-expired:
			s.setEnd(endWhy)
			return
		case <-r.Context().Done():
			return
		case <-h.ctx.Done():
			return
		}
		batch := s.take(spare)
		wrote := false
		for _, e := range batch {
			if e.Seq <= minSeq {
				continue // already sent by the replay
			}
			if err := s.write(w, e.encoded()); err != nil {
				return
			}
			s.sampleDelay(e)
			wrote = true
		}
		spare = batch
		if ending && farewell != nil {
			if err := s.write(w, farewell); err != nil {
				return
			}
			wrote = true
		}
		if wrote {
			if err := s.flush(); err != nil {
				return
			}
			lastWrite = time.Now()
		}
		if ending {
			s.setEnd(gapWhy)
			return
		}
	}
}

// setEnd records why s ended, unless that is known already.
func (s *stream) setEnd(why endReason) {
	if s.endedBy == endUnset {
		s.endedBy = why
	}
}

// failed records why s ended when its writes failed, unless that is
// known already; r is nil for a detached stream.
func (s *stream) failed(r *http.Request) {
	if s.endedBy != endUnset {
		return
	}
	s.mu.Lock()
	overflow := s.overflowed && !s.gap
	s.mu.Unlock()
	switch {
	case s.hub.ctx.Err() != nil:
		s.endedBy = endShutdown
	case overflow:
		s.endedBy = endQueueOverflow
	case r != nil && r.Context().Err() != nil:
		s.endedBy = endClientGone
	default:
		s.endedBy = endWriteError
	}
}

// sampleDelay samples the delivery delay of e, just written to s: the
// first event written to s, then one in delaySampleEvery.
func (s *stream) sampleDelay(e *Event) {
	if s.delaySample%delaySampleEvery == 0 && !e.Time.IsZero() {
		s.hub.metrics.deliveryDelay.observe(time.Since(e.Time))
	}
	s.delaySample++
}

// write writes b under a write deadline, so that a peer that stopped
// reading cannot hold the stream's goroutine forever. Moving a deadline
// costs a timer update, so it is extended only once half of the write
// timeout has elapsed: a write may then fail after between half and all
// of the timeout.
func (s *stream) write(w http.ResponseWriter, b []byte) error {
	now := time.Now()
	if timeout := s.hub.cfg.writeTimeout; s.deadline.Sub(now) < timeout/2 {
		if err := s.extendDeadline(now.Add(timeout)); err != nil {
			return err
		}
	}
	_, err := w.Write(b)
	return err
}

// errAborted ends a stream whose writes were cut (overflow or shutdown).
var errAborted = errors.New("stream aborted")

func (s *stream) extendDeadline(d time.Time) error {
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

func (s *stream) flush() error { return s.rc.Flush() }

// endAfterGap ends s because the store's feed skipped events s may have
// had: no event from after the gap may reach the client before the missed
// ones. The gap is reported before any such event is dispatched, so what
// is queued is from before it: the stream writes it, takes nothing more,
// and ends. The client resumes from its last event with Last-Event-ID and
// gets what history still holds.
func (s *stream) endAfterGap() { s.endAfter(endHistoryGap, nil) }

// endAfter makes s write what is queued, then farewell (if not nil), and
// end for why; it takes no more events.
func (s *stream) endAfter(why endReason, farewell []byte) {
	defer s.wakeDetached(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overflowed {
		return
	}
	s.overflowed, s.gap, s.gapWhy, s.farewell = true, true, why, farewell
	close(s.kicked)
}

// open registers s, enforcing the connection limits (SUB-12). It returns a
// non-zero status when s is refused.
func (h *Hub) open(s *stream) (status int, msg string) {
	h.life.Lock()
	if status, msg := h.refuseLocked(s.client); status != 0 {
		h.life.Unlock()
		return status, msg
	}
	h.conns.total++
	h.conns.perClient[s.client]++
	h.streams[s] = struct{}{}
	h.active.Add(1)
	h.life.Unlock()

	if msg := h.register(s); msg != "" {
		h.release(s)
		return http.StatusTooManyRequests, msg
	}
	return 0, ""
}

// refuse reports, without reserving anything, whether a stream of client
// would be refused now: checked before the request is parsed, so that a
// client over its limit cannot make the hub compile its patterns.
func (h *Hub) refuse(client string) (status int, msg string) {
	h.life.Lock()
	defer h.life.Unlock()
	return h.refuseLocked(client)
}

// refuseLocked applies the connection limits (SUB-12). The caller holds h.life.
func (h *Hub) refuseLocked(client string) (status int, msg string) {
	lim := &h.cfg.limits
	switch {
	case h.closed:
		return http.StatusServiceUnavailable, "the hub is shutting down"
	case lim.MaxConnections > 0 && h.conns.total >= lim.MaxConnections:
		return http.StatusTooManyRequests, "too many connections"
	case lim.MaxConnectionsPerClient > 0 && h.conns.perClient[client] >= lim.MaxConnectionsPerClient:
		return http.StatusTooManyRequests, "too many connections from this client"
	}
	return 0, ""
}

// register adds s's matchers to the index, unless its new patterns would
// exceed [Limits.MaxPatternsPerPrefix], [Limits.MaxPatternsPerTopic] or
// [Limits.MaxTotalPatternSize]; it then returns why. Patterns already
// registered are always accepted: sharing one costs nothing.
func (h *Hub) register(s *stream) (refused string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Events recorded until now are not live for s, though the dispatcher
	// may not have handed them out yet: a stream gets what is published
	// after it opens, and what it asks for from history.
	s.lastSeq = h.lastSeq.Load()
	lim := &h.cfg.limits
	for i := range s.matchers {
		m := &s.matchers[i]
		s.entries = append(s.entries, h.index.Add(m.kind, m.value, m.pattern, s))
		if !m.kind.Evaluated() {
			continue
		}
		m.pattern = h.index.Shared(m.pattern) // share the interned copy
		h.patternsUsed.Store(true)
		switch {
		case h.index.SamePrefix(m.pattern) > lim.MaxPatternsPerPrefix:
			refused = "too many distinct URL patterns with the same literal prefix"
		case h.index.MaxPerTopic() > lim.MaxPatternsPerTopic:
			refused = "too many distinct URL patterns would be evaluated for the same topics"
		case h.index.PatternSize() > lim.MaxTotalPatternSize:
			refused = "the hub holds too many URL patterns"
		default:
			continue
		}
		for _, e := range s.entries {
			h.index.Remove(e)
		}
		s.entries = nil
		return refused
	}
	if p := s.principal; p != nil && p.subscribe != nil {
		switch g := h.grantSets[p.subscribe.key]; {
		case g == nil:
			h.grantSets[p.subscribe.key] = p.subscribe
		case sameGrants(g, p.subscribe):
			p.subscribe = g
		default:
			// Unreachable with a one-to-one key; never share rights on a
			// key alone. The stream keeps its own, uninterned set.
			p.subscribe.key = ""
		}
		if p.subscribe.key != "" {
			p.subscribe.refs++
		}
	}
	return ""
}

// unregister removes s's matchers from the index.
func (h *Hub) unregister(s *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range s.entries {
		h.index.Remove(e)
	}
	if p := s.principal; p != nil && p.subscribe != nil && p.subscribe.key != "" && len(s.entries) > 0 {
		if p.subscribe.refs--; p.subscribe.refs == 0 {
			delete(h.grantSets, p.subscribe.key)
		}
	}
}

// close unregisters s once its handler is done.
func (h *Hub) close(s *stream) {
	s.failed(nil)
	h.metrics.streamsClosed[s.endedBy].Add(1)
	h.unregister(s)
	s.mu.Lock()
	s.finished = true
	if s.recheck != nil {
		s.recheck.Stop()
	}
	h.queued.Add(-int64(s.queueBytes))
	s.queue, s.queueBytes = nil, 0
	s.mu.Unlock()
	h.release(s)
}

// release frees the connection slot and lifetime accounting of s.
func (h *Hub) release(s *stream) {
	h.life.Lock()
	delete(h.streams, s)
	h.conns.total--
	if h.conns.perClient[s.client]--; h.conns.perClient[s.client] == 0 {
		delete(h.conns.perClient, s.client)
	}
	h.life.Unlock()
	h.active.Done()
}

var keepAliveComment = []byte(sse.KeepAlive)
