package mercure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/mercurekit/mercure/internal/chars"
	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/form"
	"github.com/mercurekit/mercure/internal/token"
	"github.com/mercurekit/mercure/store"
)

// maxTopicBytes is the longest topic the hub accepts. Resolving a topic as
// a URL costs time quadratic in its length on some inputs, so longer ones
// are refused outright.
const maxTopicBytes = 2048

// Update is what a publisher sends to the hub.
type Update struct {
	// Topics name the resource: the first is the canonical topic, the
	// others alternate topics (spec §Terminology). Subscribers receive the
	// update when one of their matchers selects any of them. At least one is
	// required. The hub compares topics byte for byte: canonicalize them
	// (Unicode NFC, lowercase host, one percent-encoding) before publishing
	// and subscribing (spec §Matcher Types: Exact Matching).
	Topics []string
	// Data is the content, opaque to the hub; any UTF-8 text. Subscribers
	// receive CR and CRLF line breaks as LF (spec §Publication).
	Data string
	// Private restricts the update to subscribers whose access token grants
	// subscribe on one of its topics (spec §Authorization: Subscribers).
	// Every alternate topic widens that audience.
	Private bool
	// ID is the SSE id; the hub generates a random urn:uuid: when empty.
	// Ids are cursors into one hub-wide sequence: keep them unique. An
	// update sent again with the same id and content is recorded once
	// (see [store.Store.Append]): give an update an id to make retries safe.
	ID string
	// Type is the SSE event type; empty means the default "message".
	Type string
	// Retry, when set, is sent as the SSE reconnection delay, in whole
	// milliseconds. On Go 1.26, write Retry: new(5 * time.Second).
	Retry *time.Duration
}

// Publish validates u with the rules of the HTTP endpoint (spec
// §Publication), stores it and returns its id; the hub then delivers it to
// the matching subscribers, in the store's order, without the caller
// waiting. Once Publish returns, a stream opened on this hub without
// Last-Event-ID does not get u (docs/clusters.md says what another hub
// sharing the store promises). It needs no token: application code is
// trusted.
//
// ctx bounds only how long Publish waits for room when the hub receives
// updates faster than it delivers them ([Limits].MaxPendingUpdates):
// nothing is recorded then. It never cancels an update the store has, so
// a request's context is fine to pass; a store that fails or times out
// makes Publish return an error wrapping [ErrStore]. ctx's trace is the
// parent of Publish's span.
func (h *Hub) Publish(ctx context.Context, u Update) (id string, err error) {
	if !h.tracing() {
		return h.publishGo(ctx, u)
	}
	ctx, span := h.tracer.Start(ctx, spanPublish, sourceGo)
	id, err = h.publishGo(ctx, u)
	endPublishSpan(span, &u, id, err)
	return id, err
}

// publishGo is Publish, without its span.
func (h *Hub) publishGo(ctx context.Context, u Update) (id string, err error) {
	// Own the caller's slices and pointers before checking them: the
	// caller may change them while the update is validated or retained.
	u.Topics = slices.Clone(u.Topics)
	if u.Retry != nil {
		retry := *u.Retry
		u.Retry = &retry
	}
	if err := h.validate(&u); err != nil {
		h.ops.metrics.refused[refusalIndex(publishStatus(err))].Add(1)
		return "", err
	}
	id, err = h.publish(ctx, u)
	switch {
	case err == nil:
		h.ops.metrics.publishedGo.Add(1)
	case ctx.Err() == nil:
		h.ops.metrics.refused[refusalIndex(publishStatus(err))].Add(1)
	}
	return id, err
}

// publishStatus is the status the publish endpoint answers err with.
func publishStatus(err error) int {
	switch {
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrHubClosed), errors.Is(err, ErrStore), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// validateEvent reports why the hub would refuse e's update, for a
// [store.OutboxStore].
func (h *Hub) validateEvent(e *store.Event) error {
	return h.validate(&Update{Topics: e.Topics, Data: e.Data, Private: e.Private, ID: e.ID, Type: e.Type, Retry: e.Retry})
}

// ValidateUpdate reports why a hub with the default limits would refuse
// u (spec §Publication), or nil. Unlike [Hub.Publish], it cannot tell
// whether a topic lies in a hub's reserved namespace, which depends on
// the hub's URL: it refuses only the topics below "/.well-known/mercure"
// of any origin; nor whether the hub can authorize readers of a private
// update.
func ValidateUpdate(u Update) error {
	return validateUpdate(&u, &defaultLimits, func(t string) bool {
		return strings.Contains(t, "/.well-known/mercure")
	})
}

// validate enforces PUB-2 to PUB-12 and the size limits on an update from
// any source: an update the HTTP endpoint would refuse is refused from Go
// code too.
func (h *Hub) validate(u *Update) error {
	if err := validateUpdate(u, &h.cfg.limits, h.resolver.Reserved); err != nil {
		return err
	}
	if u.Private && !h.authorizesSubscribers() {
		return fmt.Errorf("%w: private, on a hub that authorizes no subscriber: no stream could receive it", ErrInvalidUpdate)
	}
	return nil
}

func validateUpdate(u *Update, lim *Limits, reserved func(string) bool) error {
	switch {
	case len(u.Topics) == 0:
		return fmt.Errorf("%w: no topic", ErrInvalidUpdate)
	case len(u.Topics) > lim.MaxTopics:
		return fmt.Errorf("%w: more than %d topics", ErrTooLarge, lim.MaxTopics)
	case len(u.Data) > int(min(lim.MaxBodyBytes, math.MaxInt)):
		return fmt.Errorf("%w: data longer than %d bytes", ErrTooLarge, lim.MaxBodyBytes)
	case len(u.ID) > lim.MaxFieldBytes || len(u.Type) > lim.MaxFieldBytes:
		return fmt.Errorf("%w: id or type longer than %d bytes", ErrTooLarge, lim.MaxFieldBytes)
	}
	for i, t := range u.Topics {
		switch {
		case !chars.Valid(t):
			return fmt.Errorf("%w: topic %d %q holds control or format characters", ErrInvalidUpdate, i, t)
		case len(t) > maxTopicBytes:
			return fmt.Errorf("%w: topic %d is longer than %d bytes", ErrInvalidUpdate, i, maxTopicBytes)
		case len(t) > lim.MaxFieldBytes:
			return fmt.Errorf("%w: topic %d is longer than %d bytes", ErrTooLarge, i, lim.MaxFieldBytes)
		case t == "*":
			return fmt.Errorf("%w: * is a matcher, never a topic", ErrInvalidUpdate)
		case reserved(t):
			return fmt.Errorf("%w: topic %q is in the hub's reserved namespace", ErrInvalidUpdate, t)
		}
	}
	if !utf8.ValidString(u.Data) {
		return fmt.Errorf("%w: data is not valid UTF-8", ErrInvalidUpdate)
	}
	if u.ID != "" && (!chars.Valid(u.ID) || u.ID[0] == '#' || u.ID == store.Earliest) {
		return fmt.Errorf("%w: id %q", ErrInvalidUpdate, u.ID)
	}
	if u.Type != "" && (!chars.Valid(u.Type) || u.Type == "mercure") {
		return fmt.Errorf("%w: type %q", ErrInvalidUpdate, u.Type)
	}
	if u.Retry != nil && *u.Retry < 0 {
		return fmt.Errorf("%w: negative retry %v", ErrInvalidUpdate, *u.Retry)
	}
	return nil
}

// publish stores and dispatches a valid update.
func (h *Hub) publish(ctx context.Context, u Update) (string, error) {
	if h.isClosed() {
		return "", ErrHubClosed
	}
	if u.ID == "" {
		u.ID = "urn:uuid:" + uuid.NewString() // random, not time-ordered (REC-12)
	}
	e := &store.Event{ID: u.ID, Topics: u.Topics, Data: u.Data, Private: u.Private, Type: u.Type, Retry: u.Retry, Time: time.Now()}
	v := newView(e) // once, here, rather than under the store's lock
	if h.engine.PatternsUsed() {
		v.URLs(h.resolver) // on the publisher's goroutine, not the dispatcher's
	}
	if err := h.waitRoom(ctx); err != nil {
		return "", err
	}
	if err := h.ops.feedErr.Load(); err != nil {
		// An update recorded now would reach no stream until the feed is
		// back, and then only if history still holds it: publishing
		// comes back with the live feed.
		return "", fmt.Errorf("%w: %w: %w", ErrStore, errFeedDown, *err)
	}
	// Past this point the update is the store's: the caller's context
	// no longer cancels it (see Hub.Publish), the store bounds its time.
	if err := h.appendEvent(context.WithoutCancel(ctx), e, v); err != nil {
		return "", fmt.Errorf("%w: %w", ErrStore, err)
	}
	// A stream opened from now on does not get it live, however late the
	// store's feed brings it (on a store shared over the network).
	h.engine.Published(e.Seq, e.ID, e.Topics, len(v.Bytes))
	h.ops.metrics.publishDuration.Observe(time.Since(e.Time))
	return u.ID, nil
}

func (h *Hub) isClosed() bool { return h.ops.ctx.Err() != nil }

// errFeedDown is why a publish is refused while the store's live feed is
// down: an update recorded then would not be delivered.
var errFeedDown = errors.New("the store's live feed is down, so an update recorded now would not be delivered")

// waitRoom waits until the dispatcher has room for one more update, or
// ctx ends: only a hub that receives updates faster than it can hand
// them to its streams waits (see [Limits.MaxPendingUpdates]).
func (h *Hub) waitRoom(ctx context.Context) error {
	err := h.engine.WaitRoom(ctx)
	if errors.Is(err, engine.ErrClosed) {
		return ErrHubClosed
	}
	return err
}

// publishWait bounds how long a POST waits for room in the dispatcher's
// backlog (see [Limits.MaxPendingUpdates]) before it gets 503.
const publishWait = 5 * time.Second

// servePublish is the publish endpoint (PUB-1).
func (h *Hub) servePublish(w http.ResponseWriter, r *http.Request) {
	span := noSpan
	if h.tracing() {
		var ctx context.Context
		ctx, span = h.tracer.Start(requestContext(r), spanPublish, sourceHTTP)
		r = r.WithContext(ctx) // a copy of the request only when traced
	}
	rw := &refusalWriter{ResponseWriter: w}
	h.servePublishCounted(rw, r)
	switch {
	case rw.status == http.StatusOK:
		h.ops.metrics.publishedHTTP.Add(1)
	case rw.status != 0:
		h.ops.metrics.refused[refusalIndex(rw.status)].Add(1)
	}
	endSpanStatus(span, rw.status)
}

func (h *Hub) servePublishCounted(w http.ResponseWriter, r *http.Request) {
	h.limitBodyTime(w, r)
	p, v := h.admit(r, token.Publisher)
	if !v.serves() {
		h.refuse(w, r, v)
		return
	}
	body, err := h.readForm(w, r)
	if err != nil {
		writeFormError(w, err)
		return
	}
	u, err := h.parseUpdate(body)
	if err == nil {
		err = h.validate(&u)
	}
	switch {
	case errors.Is(err, ErrTooLarge):
		writeProblem(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	case err != nil:
		writeProblem(w, http.StatusBadRequest, err.Error())
		return
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetAttributes(attrTopics.Int(len(u.Topics)), attrPrivate.Bool(u.Private))
	}
	if i := p.unpublishable(u.Topics); !h.cfg.insecurePublish && i >= 0 {
		// AUTH-34: publish on every topic, or nothing is dispatched.
		h.refuse(w, r, denied(publishGrantDenial(p, i, u.Topics[i]), token.Publisher, nil))
		return
	}
	// Room in the dispatcher's backlog: only an overloaded hub waits,
	// and a POST not for long.
	wait, cancel := context.WithTimeout(r.Context(), publishWait)
	err = h.waitRoom(wait)
	cancel()
	switch {
	case errors.Is(err, ErrHubClosed):
		writeProblem(w, http.StatusServiceUnavailable, "the hub is shutting down")
		return
	case r.Context().Err() != nil:
		return // the publisher left; nothing was recorded
	case err != nil:
		writeProblem(w, http.StatusServiceUnavailable, "the hub is overloaded: too many updates wait to be delivered")
		return
	}
	id, err := h.publish(r.Context(), u)
	switch {
	case errors.Is(err, ErrHubClosed):
		writeProblem(w, http.StatusServiceUnavailable, "the hub is shutting down")
		return
	case errors.Is(err, errFeedDown):
		writeProblem(w, http.StatusServiceUnavailable, "the store's live feed is down: updates are refused until it is back, so that none is recorded without being delivered")
		return
	case err != nil: // logged by publish, once per outage
		writeProblem(w, http.StatusServiceUnavailable, "the update could not be stored")
		return
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetAttributes(attrUpdateID.String(id))
	}
	// PUB-14: exactly 200, text/plain, the id as the whole body.
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, id)
}

// parseUpdate reads the publish form fields (PUB-2 to PUB-13). Repeated
// single-valued fields keep their first value, as URLSearchParams.get does.
func (h *Hub) parseUpdate(body string) (Update, error) {
	var (
		u                   Update
		seenData, seenID    bool
		seenType, seenRetry bool
		lim                 = h.cfg.limits
	)
	for _, p := range form.Parse(body) {
		switch p.Name {
		case "topic", "id", "type", "retry":
			max := lim.MaxFieldBytes
			if p.Name == "topic" {
				max = min(max, maxTopicBytes)
			}
			if len(p.Value) > max {
				return u, fmt.Errorf("%w: field %s is longer than %d bytes", ErrTooLarge, p.Name, max)
			}
		}
		switch p.Name {
		case "topic":
			if len(u.Topics) == lim.MaxTopics {
				return u, fmt.Errorf("%w: more than %d topics", ErrTooLarge, lim.MaxTopics)
			}
			u.Topics = append(u.Topics, p.Value)
		case "data":
			if !seenData {
				u.Data, seenData = p.Value, true
			}
		case "private":
			u.Private = true // PUB-8: presence alone, whatever the value
		case "id":
			if !seenID {
				if p.Value == "" {
					return u, fmt.Errorf("%w: empty id", ErrInvalidUpdate)
				}
				u.ID, seenID = p.Value, true
			}
		case "type":
			if !seenType {
				u.Type, seenType = p.Value, true
			}
		case "retry":
			if !seenRetry {
				d, err := parseRetry(p.Value)
				if err != nil {
					return u, err
				}
				u.Retry, seenRetry = &d, true
			}
		}
		// PUB-13: other fields, access_token included, are ignored.
	}
	return u, nil
}

// parseRetry accepts only ASCII digits (PUB-12), as milliseconds.
func parseRetry(s string) (time.Duration, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: retry %q is not a number of milliseconds", ErrInvalidUpdate, s)
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return 0, fmt.Errorf("%w: retry %q is out of range", ErrInvalidUpdate, s)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
