package mercure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/store"
)

// StreamFilter selects streams by who opened them, for [Hub.EndStreams].
// A stream is selected when every field that is not empty matches it.
type StreamFilter struct {
	// Subject is the user: the sub claim of the stream's access token,
	// or the Subject of the [Access] that authorized it.
	Subject string
	// Session is the user's session: the sid claim of the stream's
	// access token (as OpenID Connect names a session), or the Session of
	// the [Access] that authorized it.
	Session string
}

// EndStreams ends, now, the streams that f selects, on this hub and on
// every hub sharing its store: at a logout, or when a user's rights
// change. Each stream ends cleanly ([CloseRevoked]); its client
// reconnects as EventSource does and is authorized again, so clear the
// session (or the cookie holding its token) first: EndStreams revokes no
// credential. A token stays valid until it expires.
//
// This hub's streams end before EndStreams returns. The other hubs get
// the instruction through the store, as an event that the hub generates
// on a topic of its reserved namespace: private, delivered to no
// subscriber, never replayed, and acted on once, on the streams open
// before it (a stream opened afterwards, by a new login, stays). The
// error wraps [ErrStore] when the store did not record it: only this
// hub's streams ended. The values of f travel hashed.
func (h *Hub) EndStreams(ctx context.Context, f StreamFilter) error {
	if f.Subject == "" && f.Session == "" {
		return ErrEmptyFilter
	}
	if h.isClosed() {
		return ErrHubClosed
	}
	sel := f.selector()
	h.endOwned(sel, math.MaxUint64)
	data, err := json.Marshal(sel)
	if err != nil {
		return err
	}
	if err := h.appendHubEvent(ctx, h.endStreamsTopic(), string(data)); err != nil {
		return fmt.Errorf("%w: telling the other hubs to end the streams: %w", ErrStore, err)
	}
	return nil
}

// streamSelector is a StreamFilter hashed: what travels through the store.
type streamSelector struct {
	Subject string `json:"subject,omitempty"`
	Session string `json:"session,omitempty"`
}

func (f StreamFilter) selector() streamSelector {
	return streamSelector{Subject: ownerHash("sub", f.Subject), Session: ownerHash("sid", f.Session)}
}

// ownerHash hashes a subject or a session, "" staying "".
func ownerHash(kind, v string) string {
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(kind + "\x00" + v))
	return hex.EncodeToString(sum[:])
}

// endStreamsTopic is the topic of EndStreams instructions, in the hub's
// reserved namespace: no publisher can publish there.
func (h *Hub) endStreamsTopic() string { return h.url + "/streams/end" }

// isEndStreams reports whether an event of these topics is an EndStreams
// instruction of this hub (private, its only topic the reserved one).
func (h *Hub) isEndStreams(private bool, topics []string) bool {
	return private && len(topics) == 1 && topics[0] == h.endStreamsTopic()
}

// owners indexes the open streams by their principal's hashed subject and
// session, for EndStreams.
type owners struct {
	mu      sync.Mutex
	streams map[streamSelector]map[*subscriber]struct{}
	// seq is the Seq of the last event the store's feed delivered: a
	// stream records it as it registers (under mu), and an instruction
	// ends only the streams registered before it came (see endOwned).
	seq atomic.Uint64
}

// ownerKey is the index key of a stream of p, zero when p names no one.
func ownerKey(p *principal) streamSelector {
	if p == nil {
		return streamSelector{}
	}
	return streamSelector{Subject: ownerHash("sub", p.subject), Session: ownerHash("sid", p.sessionID)}
}

// addOwner indexes s under its principal's subject and session.
func (h *Hub) addOwner(s *subscriber) {
	k := ownerKey(s.principal)
	if k == (streamSelector{}) {
		return
	}
	o := &h.sessions.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	s.owner = &owned{sel: k, seq: o.seq.Load()}
	for _, key := range k.keys() {
		m := o.streams[key]
		if m == nil {
			m = make(map[*subscriber]struct{})
			o.streams[key] = m
		}
		m[s] = struct{}{}
	}
}

// removeOwner takes s, which ended, out of the index.
func (h *Hub) removeOwner(s *subscriber) {
	if s.owner == nil {
		return
	}
	o := &h.sessions.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, key := range s.owner.sel.keys() {
		if m := o.streams[key]; m != nil {
			delete(m, s)
			if len(m) == 0 {
				delete(o.streams, key)
			}
		}
	}
}

// keys returns the index keys of a stream: by subject, by session.
func (k streamSelector) keys() []streamSelector {
	var out []streamSelector
	if k.Subject != "" {
		out = append(out, streamSelector{Subject: k.Subject})
	}
	if k.Session != "" {
		out = append(out, streamSelector{Session: k.Session})
	}
	return out
}

// endOwned ends the streams that sel selects among those registered
// before the event of Seq before (all of them for math.MaxUint64).
func (h *Hub) endOwned(sel streamSelector, before uint64) {
	key := streamSelector{Subject: sel.Subject}
	if sel.Subject == "" {
		key = streamSelector{Session: sel.Session}
	}
	var ending []*subscriber
	o := &h.sessions.owners
	o.mu.Lock()
	for s := range o.streams[key] {
		if s.owner.seq < before && (sel.Session == "" || s.owner.sel.Session == sel.Session) {
			ending = append(ending, s)
		}
	}
	o.mu.Unlock()
	if len(ending) > 0 {
		h.log.Info("mercure: ending streams as the application asked", "streams", len(ending))
	}
	endAll(ending, engine.EndRevoked)
}

// fed records the Seq of an event the store's feed delivered and, for an
// EndStreams instruction, acts on it: true when e was one, which no
// stream is to receive.
func (h *Hub) fed(e *store.Event) bool {
	h.sessions.owners.seq.Store(e.Seq)
	if e.Type != "mercure" || !h.isEndStreams(e.Private, e.Topics) {
		return false
	}
	var sel streamSelector
	if err := json.Unmarshal([]byte(e.Data), &sel); err != nil || (sel.Subject == "" && sel.Session == "") {
		h.log.Warn("mercure: an EndStreams instruction in the store does not parse; ignored", "id", e.ID)
		return true
	}
	h.endOwned(sel, e.Seq)
	return true
}
