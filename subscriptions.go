package mercure

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mercurekit/mercure/internal/token"
	"github.com/mercurekit/mercure/internal/uritemplate"
)

// Subscription is one active subscription: one matcher of one stream
// (ACT-2). It is also the JSON document of the subscription's events
// (ACT-9).
type Subscription struct {
	// ID is the subscription's topic:
	// hubPath/subscriptions/{match_type}/{match}/{subscriber} (ACT-3).
	ID         string `json:"id"`
	Type       string `json:"type"` // always "subscription"
	MatchType  string `json:"match_type"`
	Match      string `json:"match"`
	Subscriber string `json:"subscriber"`
	Active     bool   `json:"active"`
	// Payload is the payload of the stream token's first subscribe detail
	// matching the subscription (AUTH-41), if any.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// subscriptionRegistry holds the active subscriptions of a hub. Its own
// lock keeps listing them from ever stopping delivery.
type subscriptionRegistry struct {
	mu     sync.Mutex
	active map[*Subscription]struct{}
}

// Subscriptions returns the hub's active subscriptions, sorted by id.
func (h *Hub) Subscriptions(ctx context.Context) ([]Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &h.subscriptions
	r.mu.Lock()
	out := make([]Subscription, 0, len(r.active))
	for s := range r.active {
		out = append(out, *s)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Subscription) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// subscriptionsStarted records the subscriptions of a new stream and
// publishes their start events (ACT-2). The subscriber id is random and
// per connection, never taken from the client (ACT-6, ACT-7).
func (h *Hub) subscriptionsStarted(ctx context.Context, s *stream) {
	if !h.cfg.subscriptions {
		return
	}
	s.subscriber = "urn:uuid:" + uuid.NewString()
	s.subscriptions = make([]*Subscription, len(s.matchers))
	for i, m := range s.matchers {
		doc := &Subscription{
			// ACT-5: both parts are expanded once, the raw matcher never decoded.
			ID:         h.path + "/subscriptions/" + m.typ + "/" + uritemplate.Escape(m.value) + "/" + uritemplate.Escape(s.subscriber),
			Type:       "subscription",
			MatchType:  m.typ, // ACT-4: the canonical type, exact for a bare match
			Match:      m.value,
			Subscriber: s.subscriber,
			Active:     true,
		}
		if p := s.principal; p != nil {
			doc.Payload = token.Payload(p.details, m.value, h.grantMatchesTopic)
		}
		s.subscriptions[i] = doc
	}
	h.subscriptions.mu.Lock()
	for _, doc := range s.subscriptions {
		h.subscriptions.active[doc] = struct{}{}
	}
	h.subscriptions.mu.Unlock()
	for _, doc := range s.subscriptions {
		h.publishSubscriptionEvent(ctx, *doc)
	}
}

// subscriptionsEnded removes a stream's subscriptions and publishes their
// end events, also when the hub shuts down (ACT-2).
func (h *Hub) subscriptionsEnded(s *stream) {
	if len(s.subscriptions) == 0 {
		return
	}
	h.subscriptions.mu.Lock()
	for _, doc := range s.subscriptions {
		delete(h.subscriptions.active, doc)
	}
	h.subscriptions.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, doc := range s.subscriptions {
		ended := *doc
		ended.Active = false
		h.publishSubscriptionEvent(ctx, ended)
	}
}

// publishSubscriptionEvent publishes a subscription's event through the
// normal path (history, replay, authorization): private, so that only
// tokens granting subscribe on its topic see it (ACT-10), with the SSE
// type mercure and a fresh id (ACT-11). The hub generates it: the rules
// on publishers' topics and types do not apply.
func (h *Hub) publishSubscriptionEvent(ctx context.Context, doc Subscription) {
	data, err := json.Marshal(doc)
	if err != nil {
		h.log.Error("mercure: encoding a subscription event", "error", err)
		return
	}
	e := &Event{Update: Update{
		Topics:  []string{doc.ID},
		Data:    string(data),
		Private: true,
		ID:      "urn:uuid:" + uuid.NewString(),
		Type:    "mercure",
	}, Time: time.Now()}
	e.encoded()
	if err := h.store.Append(ctx, e); err != nil {
		h.log.Warn("mercure: storing a subscription event", "error", err)
	}
}

// grantMatchesTopic tells whether a token's grant matcher selects topic,
// for payload selection.
func (h *Hub) grantMatchesTopic(m token.Matcher, topic string) bool {
	gm, err := h.grantMatcher(m)
	return err == nil && gm.matches(topic)
}
