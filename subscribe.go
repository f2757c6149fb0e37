package mercure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/form"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/token"
	"github.com/mercurekit/mercure/store"
	"go.opentelemetry.io/otel/trace"
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
	pairs := form.Parse(r.URL.RawQuery)
	nquery := len(pairs)
	if r.Method == methodQuery && (r.ContentLength != 0 || r.Header.Get("Content-Type") != "") {
		body, err := h.readForm(w, r)
		if err != nil {
			return req, err
		}
		pairs = form.AppendParse(pairs, body)
	}
	c := cursors{aliasRank: len(resumeAliases)}
	ms := matcherSet{lim: lim}
	for i, pair := range pairs {
		if c.take(pair, i < nquery) {
			continue
		}
		if err := h.addMatcher(&ms, pair); err != nil {
			return req, err
		}
	}
	switch {
	case len(ms.matchers) == 0 && ms.topic:
		return req, fmt.Errorf("%w: no match parameter: this hub reads match (exact topics) and match_urlpattern (URL patterns), not the pre-standard topic parameter, which it accepts only in its compatibility mode: %s", errMatcher, legacyOption)
	case len(ms.matchers) == 0:
		return req, fmt.Errorf("%w: no match parameter", errMatcher) // SUB-9
	}
	// Only a request found within every limit gets its patterns compiled.
	if err := h.compileMatchers(ms.matchers, lim); err != nil {
		return req, err
	}
	req.matchers = ms.matchers
	req.cursor, req.hasCursor = c.resolve(r)
	return req, nil
}

// matcherSet is the matchers of a subscribe request, as it is parsed.
type matcherSet struct {
	lim      *PatternLimits
	matchers []matcher
	size     int  // of the distinct URL patterns and templates
	topic    bool // a pre-standard topic= pair was seen
}

// addMatcher adds the matcher that pair names, if any, within the limits
// on matchers and on what their patterns may cost; other pairs are
// ignored, access_token included (AUTH-9).
func (h *Hub) addMatcher(ms *matcherSet, pair form.Pair) error {
	var m matcher
	var cost index.Cost
	switch typ, ok, err := matcherType(pair.Name); {
	case err != nil:
		return err
	case ok:
		if m, cost, err = h.newMatcher(typ, pair.Value, ms.lim); err != nil {
			return err
		}
	case pair.Name == "topic":
		ms.topic = true
		if h.cfg.legacy == nil {
			return nil
		}
		if m, cost, err = h.legacySelector(pair.Value, ms.lim); err != nil {
			return err
		}
	default:
		return nil
	}
	if len(ms.matchers) == h.cfg.limits.MaxMatchers {
		return fmt.Errorf("%w: more than %d matchers", errMatcher, h.cfg.limits.MaxMatchers)
	}
	if m.kind.Evaluated() && !slices.ContainsFunc(ms.matchers, m.same) {
		// The heap a request can pin is bounded, however many patterns
		// it spreads it over.
		if ms.size += cost.Size; ms.size > ms.lim.MaxStreamSize {
			return fmt.Errorf("%w: %w: the URL patterns would compile to about %d instructions, more than %d", errMatcher, index.ErrCost, ms.size, ms.lim.MaxStreamSize)
		}
	}
	ms.matchers = append(ms.matchers, m)
	return nil
}

// cursors are the last event ids a subscribe request names: in its query,
// its body, and the parameters of older clients (see resumeAliases).
type cursors struct {
	query, body, alias string
	hasQuery, hasBody  bool
	aliasRank          int // of alias in resumeAliases; len(resumeAliases) for none
}

// take records pair when it names a cursor, and reports whether it does.
// Repeated, the first of each kind counts.
func (c *cursors) take(pair form.Pair, inQuery bool) bool {
	if pair.Name == "last_event_id" {
		switch {
		case inQuery && !c.hasQuery:
			c.query, c.hasQuery = pair.Value, true
		case !inQuery && !c.hasBody:
			c.body, c.hasBody = pair.Value, true
		}
		return true
	}
	if rank := slices.Index(resumeAliases[:], pair.Name); rank >= 0 {
		if inQuery && rank < c.aliasRank {
			c.alias, c.aliasRank = pair.Value, rank
		}
		return true
	}
	return false
}

// resolve returns the cursor the request resumes from (REC-3): the
// Last-Event-ID header beats the query, which beats the body; the
// parameters of older clients come last.
func (c *cursors) resolve(r *http.Request) (cursor string, ok bool) {
	switch v, ok := r.Header["Last-Event-Id"]; {
	case ok && len(v) > 0:
		return v[0], true
	case c.hasQuery:
		return c.query, true
	case c.hasBody:
		return c.body, true
	case c.aliasRank < len(resumeAliases):
		return c.alias, true
	}
	return "", false
}

// subscriber is the hub's side of one stream: the rights and matchers
// it was opened with, its active subscriptions, its session re-checks.
type subscriber struct {
	hub       *Hub
	stream    *engine.Stream
	principal *principal
	matchers  []matcher
	client    string // connection-limit key
	// subscriptions are its active subscriptions, with WithSubscriptions
	// (ACT); started is closed once their start is announced (nil: not
	// announced).
	subscriptions []*Subscription
	started       <-chan struct{}
	// interned is whether the principal's subscribe grants are counted
	// in the hub's interned sets.
	interned bool
	// group is, for a stream that the Authorizer authorized, the streams
	// re-checked with it (under the hub's rechecker lock).
	group *sessionGroup
	// owner is, for a stream with a subject or a session, where it is
	// indexed for Hub.EndStreams (nil for the others: most idle streams
	// pay one pointer).
	owner *owned
}

// owned is how a stream is indexed for Hub.EndStreams: its hashed
// subject and session, and the feed's position as it was indexed.
type owned struct {
	sel streamSelector
	seq uint64
}

// ReadsPrivate reports whether the stream may receive ev, for dispatch.
func (s *subscriber) ReadsPrivate(ev *engine.Event) bool {
	return s.principal.mayReadDispatched(ev, s.hub.resolver)
}

// Ended cleans up after the stream: its re-checks, its interned grants,
// its active subscriptions, whose end it returns to announce.
func (s *subscriber) Ended() (later func()) {
	h := s.hub
	h.stopRecheck(s)
	h.removeOwner(s)
	if s.interned {
		h.releaseGrants(s.principal)
	}
	if len(s.subscriptions) == 0 {
		return nil
	}
	h.subscriptionsRemoved(s)
	if s.started == nil {
		return nil // ended before its start was announced: its end is not either
	}
	return func() { h.announceEnded(s) }
}

// matches reports whether one of the stream's matchers selects one of e's
// topics and the stream may read e: the same rules as live dispatch,
// applied to replayed events with the principal presented now (REC-5).
func (s *subscriber) matches(e *engine.Event) bool {
	if e.Private && (s.hub.isEndStreams(true, e.Topics) || !s.principal.mayRead(e, s.hub.resolver)) {
		return false
	}
	for i := range s.matchers {
		if s.matchers[i].matchesEvent(e, s.hub.resolver) {
			return true
		}
	}
	return false
}

// expiry is when a stream must end at the latest (AUTH-37): when its
// token expires, or at the end of the maximum lifetime; zero for never.
// why says which.
func (h *Hub) expiry(p *principal) (end time.Time, why engine.EndReason) {
	if p != nil && !p.session { // a session is re-checked instead
		end, why = p.expiry, engine.EndTokenExpired
	}
	if d := h.cfg.limits.StreamLifetime; d > 0 && (end.IsZero() || time.Now().Add(d).Before(end)) {
		end, why = time.Now().Add(d), engine.EndLifetime
	}
	return end, why
}

// expiryReason is why a stream of p whose deadline passed ended: its
// token expired, or else def.
func expiryReason(p *principal, def engine.EndReason) engine.EndReason {
	if p != nil && !p.session && !time.Now().Before(p.expiry) {
		return engine.EndTokenExpired
	}
	return def
}

// serveSubscribe is the subscribe endpoint (SUB-1, SUB-2): it admits the
// request, then hands its stream to the engine, which runs it from its
// registration to its end.
func (h *Hub) serveSubscribe(w http.ResponseWriter, r *http.Request) {
	// The span covers the request until its stream is open, not the
	// stream's life: a trace of hours helps no one, and a span held per
	// stream would cost memory per connection.
	ctx, span := r.Context(), noSpan
	if h.tracing() {
		ctx, span = h.tracer.Start(requestContext(r), spanSubscribe)
	}
	rw := &refusalWriter{ResponseWriter: w, subscribe: true} // for the refusals' status
	setup := &setupSpan{span: span, rw: rw}
	defer setup.end(errNotOpened)
	sub, req, v := h.admitSubscription(rw, r)
	if !v.serves() {
		h.refuse(rw, r, v)
		return
	}
	if span.IsRecording() {
		span.SetAttributes(attrMatchers.Int(len(sub.matchers)), attrAnon.Bool(sub.principal == nil))
	}
	h.serveStream(ctx, w, rw, r, sub, req, setup)
}

// setupSpan ends the subscribe span once: with the refusal's status, or
// the error given.
type setupSpan struct {
	span  trace.Span
	rw    *refusalWriter
	ended bool
}

func (s *setupSpan) end(err error) {
	if s.ended {
		return
	}
	s.ended = true
	if s.rw.status != 0 {
		endSpanStatus(s.span, s.rw.status)
	} else {
		endSpan(s.span, err)
	}
}

// admitSubscription decides on a subscribe request: the stream's
// subscriber and what it asked for, or the refusal. The costs a client
// can cause are paid in the order that bounds them: its connection
// budget, then its credentials, and only then its body and its patterns.
func (h *Hub) admitSubscription(w http.ResponseWriter, r *http.Request) (*subscriber, subscribeRequest, verdict) {
	var req subscribeRequest
	if h.ops.shutting.Load() && !h.isClosed() {
		return nil, req, verdict{kind: drained} // come back soon, elsewhere
	}
	if r.Method == methodQuery {
		h.limitBodyTime(w, r)
	}
	client := h.cfg.clientKey(r)
	if v := h.overBudget(client); !v.serves() {
		return nil, req, v
	}
	p, v := h.admit(r, token.Subscriber)
	if !v.serves() {
		return nil, req, v
	}
	req, err := h.parseSubscribe(w, r, p)
	if err != nil {
		return nil, req, verdict{kind: problem, err: err}
	}
	return &subscriber{hub: h, principal: p, matchers: req.matchers, client: client}, req, verdict{}
}

// serveStream hands sub's stream to the engine: its grants interned, its
// matchers registered, its history replayed when it resumes, its
// subscriptions announced once it is set up.
func (h *Hub) serveStream(ctx context.Context, w http.ResponseWriter, rw *refusalWriter, r *http.Request, sub *subscriber, req subscribeRequest, setup *setupSpan) {
	ms := make([]engine.Matcher, len(sub.matchers))
	for i, m := range sub.matchers {
		ms[i] = engine.Matcher{Kind: m.kind, Value: m.value, Pattern: m.pattern}
	}
	end, why := h.expiry(sub.principal)
	spec := engine.Spec{Owner: sub, Client: sub.client, Anonymous: sub.principal == nil, Expiry: end, ExpiryWhy: why, Matchers: ms,
		Opened: func(st *engine.Stream) {
			for i := range ms {
				sub.matchers[i].pattern = ms[i].Pattern // share the interned copy
			}
			h.streamOpened(sub, st, r)
		},
		Started: func() {
			setup.end(nil)
			// After the headers and the replay: the store's pace is not
			// the stream's (ACT-2).
			sub.started = h.announceStarted(sub)
		},
	}
	if req.hasCursor {
		spec.Replay = func(rp *engine.Replay) (uint64, bool) { return h.replay(ctx, rw, r, sub, rp, req.cursor) }
	}
	// Before the stream is visible to dispatch, which reads its grants.
	sub.interned = h.internGrants(sub.principal)
	switch err := h.engine.Serve(w, r, spec); {
	case err == nil:
	case errors.Is(err, engine.ErrNotStarted):
		// Registered, then ended before its first byte (its owner cleaned
		// up after it): a refusal, not a stream that opened and closed.
		h.log.DebugContext(ctx, "mercure: a stream could not start; refused for now", "client", sub.client, "error", err)
		rw.Header().Del("Mercure-Last-Event-ID") // set by a replay for its headers
		h.refuse(rw, r, unavailableFor(http.StatusServiceUnavailable, err.Error()))
	case errors.Is(err, http.ErrNotSupported):
		h.log.ErrorContext(ctx, "mercure: the response writer cannot flush; streams need http.Flusher")
	default: // refused before its registration: nothing was written
		if sub.interned {
			h.releaseGrants(sub.principal)
			sub.interned = false
		}
		h.refuse(rw, r, engineRefusal(err))
	}
}

// streamOpened records a stream the engine registered: indexed by owner
// for EndStreams, re-checked when a session authorized it, its
// subscriptions listed from its first byte.
func (h *Hub) streamOpened(sub *subscriber, st *engine.Stream, r *http.Request) {
	sub.stream = st
	h.addOwner(sub)
	if p := sub.principal; p != nil && p.session {
		h.startRecheck(sub, r) // instead of an expiry
	}
	h.subscriptionsStarted(sub)
}

// replay sends the retained events that follow cursor (REC-4) through rp
// and returns the highest sequence it covered. The stream is already
// registered: live events queue up meanwhile, and the engine drops those
// the replay covered, so the seam has neither gap nor duplicate. ok is
// false when the stream must end; a temporary refusal before the first
// byte is answered through w, whose refusals an EventSource retries.
//
// ctx is the request's, with the subscribe span.
func (h *Hub) replay(ctx context.Context, w http.ResponseWriter, r *http.Request, s *subscriber, rp *engine.Replay, cursor string) (minSeq uint64, ok bool) {
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
	defer context.AfterFunc(h.ops.ctx, cancel)() // shutdown interrupts the replay
	// Replays read and filter history: only so many at once, each for a
	// bounded time, a slow client's included.
	h.ops.metrics.replays.Add(1)
	if !h.acquireReplay(ctx) {
		if r.Context().Err() == nil {
			rp.End(engine.EndReplayError)
			failure = errNoReplaySlot
			h.refuse(w, r, unavailableFor(http.StatusServiceUnavailable, "too many replays in progress"))
		}
		return 0, false
	}
	defer func() { <-h.replays }()
	ctx, cancelReplay := context.WithTimeout(ctx, h.cfg.limits.ReplayTimeout)
	defer cancelReplay()
	var backlog store.Backlog
	if backlog, failure, ok = h.openBacklog(ctx, w, r, rp, cursor); !ok {
		return 0, false
	}
	rp.Header().Set("Mercure-Last-Event-ID", backlog.Cursor) // REC-9: before the first byte
	if failure = rp.Flush(); failure != nil {                // SUB-14: headers at once, however long the replay
		return 0, false
	}
	minSeq, replayed, failure, ok = h.writeReplay(ctx, r, s, rp, backlog)
	return minSeq, ok
}

// openBacklog opens the store's backlog from cursor; when it cannot, it
// answers r through w with a temporary refusal (unless the client left)
// and returns false, and why.
func (h *Hub) openBacklog(ctx context.Context, w http.ResponseWriter, r *http.Request, rp *engine.Replay, cursor string) (b store.Backlog, failure error, ok bool) {
	sctx, sspan := h.startSpan(ctx, spanStoreReplay, nil)
	b, err := h.store.Replay(sctx, cursor)
	endSpan(sspan, err)
	switch {
	case err == nil:
		h.ops.reads.recovered(ctx, h.log, "mercure: reading history works again")
		return b, nil, true
	case h.ops.ctx.Err() != nil:
		h.refuse(w, r, unavailableFor(http.StatusServiceUnavailable, "the hub is shutting down"))
	case r.Context().Err() != nil: // the client left
	default:
		h.ops.metrics.storeErrors.Add(1)
		rp.End(engine.EndReplayError)
		h.ops.reads.failed(ctx, h.log, slog.LevelWarn, "mercure: reading history fails; streams that resume get 503 until it recovers", err)
		h.refuse(w, r, unavailableFor(http.StatusServiceUnavailable, "history is unavailable"))
	}
	return b, err, false
}

// writeReplay writes the backlog's events that s may read, flushing in
// large batches, and returns the highest sequence it covered and how many
// it wrote; ok is false when the stream must end (the client resumes from
// the last event it got), failure says why.
func (h *Hub) writeReplay(ctx context.Context, r *http.Request, s *subscriber, rp *engine.Replay, backlog store.Backlog) (minSeq uint64, replayed int, failure error, ok bool) {
	minSeq = backlog.Head
	unflushed := 0
	var buf []byte
	for e, err := range backlog.Events {
		if err != nil || ctx.Err() != nil {
			return 0, replayed, h.replayFailed(ctx, r, s, rp, err), false
		}
		minSeq = max(minSeq, e.Seq)
		view := engine.Event{Seq: e.Seq, ID: e.ID, Topics: e.Topics, Private: e.Private, Time: e.Time}
		if !s.matches(&view) {
			continue
		}
		buf = appendSSE(buf[:0], e) // the stream copies it
		if err := rp.Write(buf); err != nil {
			return 0, replayed, err, false
		}
		h.ops.metrics.replayed.Add(1)
		replayed++
		// Flush in large batches: a long replay costs few system calls, and
		// a slow store still lets the client make progress.
		if unflushed += len(buf); unflushed >= replayFlushBytes {
			if err := rp.Flush(); err != nil {
				return 0, replayed, err, false
			}
			unflushed = 0
		}
	}
	return minSeq, replayed, nil, true
}

// replayFailed records why a replay under way stopped: the store's error
// err (history dropped under it, or a read that failed), or ctx's end
// (the token expired, or the replay took too long), and returns it.
func (h *Hub) replayFailed(ctx context.Context, r *http.Request, s *subscriber, rp *engine.Replay, err error) error {
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, store.ErrHistoryGap):
		// Retention outran this replay, as a slow subscriber is outrun:
		// no failure of the store.
		rp.End(engine.EndHistoryGap)
		h.log.DebugContext(ctx, "mercure: history dropped events before the replay reached them; ending the stream so that the client resumes", "error", err)
	default:
		h.ops.metrics.storeErrors.Add(1)
		rp.End(engine.EndReplayError)
		h.ops.reads.failed(ctx, h.log, slog.LevelWarn, "mercure: reading history fails; streams that resume get 503 until it recovers", err)
	}
	if ctx.Err() != nil && r.Context().Err() == nil && h.ops.ctx.Err() == nil {
		// The token expired, or the replay took too long.
		rp.End(expiryReason(s.principal, engine.EndReplayError))
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// replayWait is how long a stream waits for a replay slot (see
// [Limits.MaxReplays]) before it gets 503.
const replayWait = 5 * time.Second

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

// overBudget decides, without reserving anything, whether a stream of
// client would be refused now: checked before the request is parsed, so
// that a client over its limit cannot make the hub compile its patterns.
func (h *Hub) overBudget(client string) verdict {
	if err := h.engine.Refuse(client); err != nil {
		return engineRefusal(err)
	}
	return verdict{}
}

// engineRefusal is the verdict on a stream the engine refuses: every one
// is temporary (see Hub.unavailable), a budget that frees up as streams
// end (429) or a hub that is shutting down (503).
func engineRefusal(err error) verdict {
	if errors.Is(err, engine.ErrClosed) {
		return unavailableFor(http.StatusServiceUnavailable, err.Error())
	}
	return unavailableFor(http.StatusTooManyRequests, err.Error())
}

// internGrants shares the subscribe grants of p with the open streams
// that hold the same, so that dispatch evaluates each distinct set once
// per update; it reports whether it counted p's.
func (h *Hub) internGrants(p *principal) bool {
	if p == nil || p.subscribe == nil {
		return false
	}
	h.auth.mu.Lock()
	defer h.auth.mu.Unlock()
	switch g := h.auth.grantSets[p.subscribe.key]; {
	case g == nil:
		h.auth.grantSets[p.subscribe.key] = p.subscribe
	case sameGrants(g, p.subscribe):
		p.subscribe = g
	default:
		// Unreachable with a one-to-one key; never share rights on a
		// key alone. The stream keeps its own, uninterned set.
		p.subscribe.key = ""
		return false
	}
	p.subscribe.refs++
	return true
}

// releaseGrants undoes internGrants.
func (h *Hub) releaseGrants(p *principal) {
	h.auth.mu.Lock()
	defer h.auth.mu.Unlock()
	if p.subscribe.refs--; p.subscribe.refs == 0 {
		delete(h.auth.grantSets, p.subscribe.key)
	}
}
