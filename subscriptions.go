package mercure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mercurekit/mercure/internal/token"
	"github.com/mercurekit/mercure/internal/uritemplate"
	"github.com/mercurekit/mercure/store"
)

// Subscription is one active subscription: one matcher of one stream
// (spec §Active Subscriptions: Subscription Events). It is also the JSON
// document of the subscription's events.
type Subscription struct {
	// ID is the subscription's topic:
	// hubPath/subscriptions/{match_type}/{match}/{subscriber} (spec §Active
	// Subscriptions: Subscription Events).
	ID         string `json:"id"`
	Type       string `json:"type"` // always "subscription"
	MatchType  string `json:"match_type"`
	Match      string `json:"match"`
	Subscriber string `json:"subscriber"`
	Active     bool   `json:"active"`
	// Payload is the payload of the stream token's first subscribe detail
	// matching the subscription (spec §Authorization: Payloads), if any.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// presence holds the active subscriptions of a hub (ACT). Its own lock
// keeps listing them from ever stopping delivery.
type presence struct {
	sharing transition // the store failing to share subscriptions
	listing transition // the store failing to list them

	mu     sync.Mutex
	active map[*Subscription]struct{}
	// withdrawing holds the ids of ended subscriptions that a
	// [store.SubscriptionStore] may still list: their end is not shared yet.
	withdrawing map[string]struct{}
}

// Subscriptions returns the hub's active subscriptions, sorted by id. With
// a [store.SubscriptionStore] they are those of every hub sharing the store;
// when the store cannot list them, the error wraps [ErrStore].
func (h *Hub) Subscriptions(ctx context.Context) ([]Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ss, ok := h.store.(store.SubscriptionStore); ok {
		list, err := ss.Subscriptions(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: listing subscriptions: %w", ErrStore, err)
		}
		// The hub's own streams are listed from memory, as without a
		// store: from their first byte to their last, although sharing
		// their start and end with the store runs behind them. The store
		// adds the other hubs'. A copy, never nil: sorting must not touch
		// the store's slice, and the API's collection is an array (ACT-16).
		r := &h.presence
		r.mu.Lock()
		out := make([]Subscription, 0, len(r.active)+len(list))
		own := make(map[string]struct{}, len(r.active))
		for s := range r.active {
			out = append(out, *s)
			own[s.ID] = struct{}{}
		}
		for _, rec := range list {
			_, mine := own[rec.ID]
			_, ended := r.withdrawing[rec.ID]
			var s Subscription
			if !mine && !ended && json.Unmarshal(rec.JSON, &s) == nil {
				out = append(out, s)
			}
		}
		r.mu.Unlock()
		slices.SortFunc(out, func(a, b Subscription) int { return strings.Compare(a.ID, b.ID) })
		return out, nil
	}
	r := &h.presence
	r.mu.Lock()
	out := make([]Subscription, 0, len(r.active))
	for s := range r.active {
		out = append(out, *s)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Subscription) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// subscriptionsStarted records the subscriptions of a new stream (ACT-2),
// so that the hub lists them from its first byte. The subscriber id is
// random and per connection, never taken from the client (ACT-6, ACT-7).
// It does nothing without [WithSubscriptions].
func (h *Hub) subscriptionsStarted(s *subscriber) {
	if !h.cfg.subscriptions {
		return
	}
	id := "urn:uuid:" + uuid.NewString()
	s.subscriptions = make([]*Subscription, len(s.matchers))
	for i, m := range s.matchers {
		doc := &Subscription{
			// ACT-5: both parts are expanded once, the raw matcher never decoded.
			ID:         h.path + "/subscriptions/" + m.typ + "/" + uritemplate.Escape(m.value) + "/" + uritemplate.Escape(id),
			Type:       "subscription",
			MatchType:  m.typ, // ACT-4: the canonical type, exact for a bare match
			Match:      m.value,
			Subscriber: id,
			Active:     true,
		}
		if p := s.principal; p != nil {
			doc.Payload = token.Payload(p.details, m.value, h.grantMatchesTopic)
			if doc.Payload == nil {
				doc.Payload = p.payload // a legacy token's, for every subscription
			}
		}
		s.subscriptions[i] = doc
	}
	h.presence.mu.Lock()
	for _, doc := range s.subscriptions {
		h.presence.active[doc] = struct{}{}
	}
	h.presence.mu.Unlock()
}

// announceStarted shares a stream's subscriptions with a
// [store.SubscriptionStore] and appends their start events, on a goroutine of
// its own, so that the stream waits for neither. The returned channel is
// closed once that is done; it is nil when the stream has none.
func (h *Hub) announceStarted(s *subscriber) <-chan struct{} {
	if len(s.subscriptions) == 0 {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.announce(s.subscriptions, true)
	}()
	return done
}

// subscriptionsRemoved removes a stream's subscriptions from those the
// hub lists. When their start was shared with a [store.SubscriptionStore], the
// hub stops listing them at once all the same, until announceEnded has
// shared their end.
func (h *Hub) subscriptionsRemoved(s *subscriber) {
	_, shared := h.store.(store.SubscriptionStore)
	shared = shared && s.started != nil
	r := &h.presence
	r.mu.Lock()
	for _, doc := range s.subscriptions {
		delete(r.active, doc)
		if shared {
			if r.withdrawing == nil {
				r.withdrawing = make(map[string]struct{})
			}
			r.withdrawing[doc.ID] = struct{}{}
		}
	}
	r.mu.Unlock()
}

// announceEnded announces the end of a stream's subscriptions, also when
// the hub shuts down (ACT-2), once their start is announced: an end event
// never precedes its start event.
func (h *Hub) announceEnded(s *subscriber) {
	<-s.started
	h.announce(s.subscriptions, false)
}

// subscriptionEventsTimeout bounds the announcement of one stream's
// subscriptions: sharing them and appending all their events.
const subscriptionEventsTimeout = 5 * time.Second

// announce tells a [store.SubscriptionStore] that docs started (active) or
// ended, waits until every hub lists the change (ACT-17), then appends
// their events, all under one deadline, which the end of the hub's life
// cuts short (see [Hub.Shutdown]): a store that does not answer holds a
// stream's announcement for subscriptionEventsTimeout at most, whatever
// its number of subscriptions.
func (h *Hub) announce(docs []*Subscription, active bool) {
	ctx, cancel := context.WithTimeout(h.ops.events, subscriptionEventsTimeout)
	defer cancel()
	if ss, ok := h.store.(store.SubscriptionStore); ok {
		subs := make([]store.Subscription, len(docs))
		for i, doc := range docs {
			subs[i] = store.Subscription{ID: doc.ID, Active: active}
			if active {
				subs[i].JSON, _ = json.Marshal(doc) // a Payload is JSON: the hub never makes another
			}
		}
		err := ss.UpdateSubscriptions(ctx, subs)
		if err != nil {
			h.presence.sharing.failed(ctx, h.log, slog.LevelWarn, "mercure: the store fails to share subscriptions; other instances list them late", err)
		} else {
			h.presence.sharing.recovered(ctx, h.log, "mercure: the store shares subscriptions again")
		}
		if !active {
			// The store has the end, or keeps it to apply later (its
			// contract): it is the store's to list from now on.
			h.presence.mu.Lock()
			for _, doc := range docs {
				delete(h.presence.withdrawing, doc.ID)
			}
			h.presence.mu.Unlock()
		}
	}
	for _, doc := range docs {
		d := *doc
		d.Active = active
		if err := h.publishSubscriptionEvent(ctx, d); err != nil {
			return // logged once per outage by publishSubscriptionEvent
		}
	}
}

// publishSubscriptionEvent publishes a subscription's event through the
// normal path (history, replay, authorization): private, so that only
// tokens granting subscribe on its topic see it (ACT-10), with the SSE
// type mercure and a fresh id (ACT-11). The hub generates it: the rules
// on publishers' topics and types do not apply.
func (h *Hub) publishSubscriptionEvent(ctx context.Context, doc Subscription) error {
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return h.appendHubEvent(ctx, doc.ID, string(data))
}

// grantMatchesTopic tells whether a token's grant matcher selects topic,
// for payload selection.
func (h *Hub) grantMatchesTopic(m token.Matcher, topic string) bool {
	gm, err := h.grantMatcher(m)
	return err == nil && gm.matches(topic)
}

// serveSubscriptionsAPI serves the subscriptions web API (ACT-12 to
// ACT-19): the collection, the collection of one matcher, and one
// subscription, each authorized as a subscribe on its own path.
func (h *Hub) serveSubscriptionsAPI(w http.ResponseWriter, r *http.Request, api []string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	path, segs, ok := h.canonicalAPIPath(api)
	if !ok {
		writeProblem(w, http.StatusNotFound, "no such resource in the subscriptions API")
		return
	}
	p, v := h.authenticate(r, token.Subscriber)
	switch {
	case !v.serves():
	case p == nil:
		v = denied(h.missingDenial(r), token.Subscriber, nil) // ACT-13: a token is needed
	case p.subscribe == nil || !slices.ContainsFunc(p.subscribe.matchers, func(m matcher) bool { return m.matches(path) }):
		d := p.grantHolder() + " grants no subscribe on this resource of the subscriptions API"
		v = denied(grantDenial(d, d+": "+path), token.Subscriber, nil)
	}
	if !v.serves() {
		h.refuse(w, r, v)
		return
	}
	// The cursor is read before the snapshot: a client subscribing from it
	// misses no change made after the snapshot (ACT-17).
	cursor := h.LastEventID()
	subs, err := h.Subscriptions(r.Context())
	if err != nil {
		if r.Context().Err() == nil {
			h.presence.listing.failed(r.Context(), h.log, slog.LevelWarn, "mercure: the store fails to list subscriptions; the subscriptions API answers 503", err)
			writeProblem(w, http.StatusServiceUnavailable, "subscriptions are unavailable")
		}
		return
	}
	h.presence.listing.recovered(r.Context(), h.log, "mercure: the store lists subscriptions again")
	var body any
	switch len(segs) {
	case 3: // one subscription (ACT-15)
		i := slices.IndexFunc(subs, func(s Subscription) bool { return s.ID == path })
		if i < 0 {
			writeProblem(w, http.StatusNotFound, "no such subscription")
			return
		}
		body = subs[i]
	default: // a collection (ACT-16)
		if len(segs) == 2 {
			subs = slices.DeleteFunc(subs, func(s Subscription) bool {
				return s.MatchType != segs[0] || s.Match != segs[1]
			})
		}
		body = struct {
			ID            string         `json:"id"`
			Type          string         `json:"type"`
			Subscriptions []Subscription `json:"subscriptions"`
		}{path, "subscriptions", subs}
	}
	b, err := json.Marshal(body)
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "encoding failed")
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json") // ACT-14
	hdr.Add("Link", "<"+h.url+`>; rel="mercure"; last-event-id=`+quote(cursor)+`; type="mercure"; content-type="application/json"`)
	sum := sha256.Sum256(b)
	etag := quote(hex.EncodeToString(sum[:16])) // ACT-19: changes with the content
	hdr.Set("ETag", etag)
	hdr.Set("Cache-Control", "must-revalidate")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b)
}

// canonicalAPIPath returns the API path named by api, the escaped
// segments after "subscriptions" in the request path (see [Hub.route]),
// with each segment decoded and re-encoded per ACT-5, so that clients
// encoding differently reach the same resource and authorization
// (ACT-13), and the decoded segments (type, match, subscriber). The path
// is under the hub URL's path, wherever the request reached the hub.
func (h *Hub) canonicalAPIPath(api []string) (path string, segs []string, ok bool) {
	path = h.path + "/subscriptions"
	if len(api) == 0 {
		return path, nil, true
	}
	if len(api) < 2 || len(api) > 3 || (api[0] != MatchExact && api[0] != MatchURLPattern) {
		return "", nil, false
	}
	segs = []string{api[0]}
	path += "/" + api[0]
	for _, p := range api[1:] {
		v, err := url.PathUnescape(p)
		if err != nil || v == "" || v == "." || v == ".." {
			// Dot segments would be removed when the path is resolved to
			// check URL pattern grants, so the check and the lookup would
			// not be about the same resource.
			return "", nil, false
		}
		segs = append(segs, v)
		path += "/" + uritemplate.Escape(v)
	}
	return path, segs, true
}
