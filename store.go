package mercure

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/memring"
	"github.com/mercurekit/mercure/internal/sse"
	"github.com/mercurekit/mercure/store"
)

// The hub's side of the store seam (package store has the contract):
// the default store, the events the hub appends, and the engine's views
// of the events the store's feed delivers.

// defaultStore is the store of a hub without WithStore: memstore's
// defaults.
func defaultStore() store.Store {
	return memring.New(memring.Config{
		MaxEvents:   memring.DefaultMaxEvents,
		MaxBytes:    memring.DefaultMaxBytes,
		RetryWindow: store.DefaultRetryWindow,
	})
}

// newView returns the engine's view of e: what dispatch, authorization
// and the writers need, with e's SSE encoding, built once per event and
// hub and shared by every stream it reaches.
func newView(e *store.Event) *engine.Event {
	return &engine.Event{Seq: e.Seq, ID: e.ID, Topics: e.Topics, Private: e.Private, Time: e.Time, Bytes: appendSSE(nil, e)}
}

// appendSSE appends e's SSE encoding to b.
func appendSSE(b []byte, e *store.Event) []byte {
	retry := int64(-1)
	if e.Retry != nil {
		retry = e.Retry.Milliseconds()
	}
	return sse.AppendEvent(b, e.ID, e.Type, retry, e.Data)
}

// appending holds the views of the events this hub is appending, built
// on the publisher's goroutine: a store in the process (memory, bbolt)
// passes the same event to its listeners, which then find it encoded and
// its topics resolved, rather than doing it under the store's lock or on
// the dispatcher's goroutine. A store on the network passes a copy that
// it read back, whose view is built on arrival.
type appending struct{ m sync.Map } // *store.Event → *engine.Event

// appendEvent appends e, whose view is v, to the store, in a span; it
// counts and logs a failure (once per outage) unless ctx ended.
func (h *Hub) appendEvent(ctx context.Context, e *store.Event, v *engine.Event) error {
	h.appending.m.Store(e, v)
	defer h.appending.m.Delete(e) // unless the feed took it
	actx, span := h.startSpan(ctx, spanStoreAppend, nil)
	err := h.store.Append(actx, e)
	endSpan(span, err)
	switch {
	case err == nil:
		h.ops.appends.recovered(ctx, h.log, "mercure: the store records updates again")
	case ctx.Err() == nil:
		h.ops.metrics.storeErrors.Add(1)
		h.ops.appends.failed(ctx, h.log, slog.LevelError, "mercure: the store refuses updates; publishing fails until it recovers", err)
	}
	return err
}

// appendHubEvent appends an event that the hub generates on topic, in its
// reserved namespace: private, so that only tokens granting subscribe on
// topic see it (ACT-10), of the SSE type mercure, which no publisher may
// use, with a fresh id (ACT-11).
func (h *Hub) appendHubEvent(ctx context.Context, topic, data string) error {
	e := &store.Event{Topics: []string{topic}, Data: data, Private: true, ID: "urn:uuid:" + uuid.NewString(), Type: "mercure", Time: time.Now()}
	return h.appendEvent(ctx, e, newView(e))
}

// listener is what the hub gives the store to Listen with.
func (h *Hub) listener() store.Listener {
	return store.Listener{
		Event: func(e *store.Event) {
			// The hub advertises it at once (REC-13): it is recorded, so a
			// replay from it misses nothing. A stream that opens from now
			// on does not get it live.
			if h.fed(e) {
				return // an instruction, for the hub alone
			}
			var v *engine.Event
			if p, ok := h.appending.m.LoadAndDelete(e); ok {
				v = p.(*engine.Event)
				v.Seq, v.Time = e.Seq, e.Time
			} else {
				v = newView(e)
			}
			h.engine.Push(v)
		},
		// Only reported: it needs no order with the events.
		Status: h.feedStatus,
		// Ordered with the events: the streams must get those before it.
		Gap: h.engine.Gap,
		Rewound: func(head uint64, id string) {
			if head == 0 {
				id = store.Earliest
			}
			h.engine.Rewind(engine.Position{Seq: head, ID: id})
		},
	}
}
