package engine

import (
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure/internal/topicurl"
)

// Event is an update as the engine delivers it: what dispatch, the
// authorization of private updates and the writers need, built once per
// event and engine, and shared by every stream it reaches. It is
// immutable, but for the cache of its resolved topics and the count of
// the queues that hold it.
type Event struct {
	// Seq is the event's position in the store's order (never 0), and ID
	// its id.
	Seq     uint64
	ID      string
	Topics  []string
	Private bool
	// rewind marks, in the feed's queue, a rewind of the store's history
	// to Seq (see Engine.Rewind), not an event.
	rewind bool
	// Time is when the hub accepted the update, for the delivery delay.
	Time time.Time
	// Bytes is the event's SSE encoding.
	Bytes []byte

	// resolved caches the topics resolved as URLs.
	resolved topicurl.Cache

	// queues counts the streams' queues that hold the event, for the
	// engine's memory budget: its bytes count once while any does.
	queues atomic.Int32
}

// URLs returns ev's topics resolved by r (see [topicurl.Cache.Resolve]).
func (ev *Event) URLs(r *topicurl.Resolver) []topicurl.URL {
	return ev.resolved.Resolve(r, ev.Topics)
}
