// Package store is the contract between a mercure hub and the store that
// keeps its history and feeds it updates, with the pieces that the stores
// of this repository share. Applications do not import it: they pass a
// store to mercure.WithStore (memstore, the default, or boltstore,
// redisstore, pgstore); authors of a store implement [Store], and check it
// with the suites of package storetest.
//
// A store is the seam between one process and many: the in-memory store
// serves one hub, a shared store (Redis Streams, PostgreSQL) lets several
// instances of an application act as one hub. Every hub sharing a store
// sees one order of events, the store's.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"time"
)

// Earliest is the cursor that names the start of the retained history
// (spec §Reconnection, State Reconciliation, and Event Sourcing). No update
// can have it as its id (spec §Publication).
const Earliest = "earliest"

// DefaultRetryWindow is how long the stores of this repository take an
// update appended again for a retry of the one recorded (see
// [Store.Append]), unless configured otherwise.
const DefaultRetryWindow = 10 * time.Minute

// ErrHistoryGap is wrapped by the error that a [Backlog]'s Events yields
// when the store cannot go on contiguously: events it should have yielded
// next were dropped from history (by retention, say) while the replay was
// under way. A store never skips retained events silently; the hub ends
// the stream, and the client resumes from the last event it received.
var ErrHistoryGap = errors.New("mercure: history dropped events during the replay")

// Event is an update as a store records it: the update's fields, its
// position in the store's order and its publication time. Events are
// immutable once appended; the hubs sharing a store may share one.
type Event struct {
	// ID, Topics, Data, Private, Type and Retry are the update's (see
	// mercure.Update).
	ID      string
	Topics  []string
	Data    string
	Private bool
	Type    string
	Retry   *time.Duration

	// Seq is the event's position in the store's order, set by
	// [Store.Append]. It is one total order shared by every hub using the
	// store, the same in Replay and Listen, strictly increasing in the
	// order listeners see events, and never 0: a new stream drops the live
	// events whose Seq its replay already covered. Only a history that
	// loses events its feed passed on starts again below them, and the
	// feed says so first (see [Listener].Rewound).
	Seq uint64
	// Time is when the hub accepted the update.
	Time time.Time
}

// SameUpdate reports whether e and o hold the same update: the same ID,
// Topics (in the same order), Data, Private, Type and Retry. A store takes
// an event appended again with the same update for a retry (see
// [Store.Append]).
func (e *Event) SameUpdate(o *Event) bool {
	return e.ID == o.ID && e.Data == o.Data && e.Private == o.Private && e.Type == o.Type &&
		slices.Equal(e.Topics, o.Topics) &&
		(e.Retry == nil) == (o.Retry == nil) && (e.Retry == nil || *e.Retry == *o.Retry)
}

// A Store keeps the history of updates and feeds every update, from any
// hub sharing the store, to those hubs.
//
// Implementations must be safe for concurrent use.
type Store interface {
	// Append sets e.Seq, records e in the history and delivers it to
	// every listener of every hub sharing the store (a store shared over
	// the network may deliver it after Append returns). When Append
	// returns nil, e is recorded: an accepted update is never lost.
	// Append records e even when ctx is already done: ctx carries values
	// (a trace), and a store on the network bounds its own time, failing
	// rather than hanging while it is unreachable.
	//
	// An update sent again is recorded once. When e is a retry of the
	// latest retained event with its ID (the same update, see
	// [Event.SameUpdate], recorded at most the store's retry window
	// before e.Time: see [DefaultRetryWindow]), Append records and
	// delivers nothing, sets e.Seq to that event's and returns nil, as if
	// it had recorded e. This holds across the hubs sharing the store, and
	// for a first attempt whose answer was lost (the store recorded it,
	// then failed, or the hub's answer never reached the publisher). An
	// update with another content is recorded, whatever its ID (spec
	// §Reconnection, State Reconciliation, and Event Sourcing: several
	// events may share an id).
	Append(ctx context.Context, e *Event) error

	// Replay resolves the cursor lastEventID and returns the retained
	// events that follow it (see [Backlog]). The cursor resolves to the
	// oldest retained event with that id (spec §Reconnection, State
	// Reconciliation, and Event Sourcing); when it is [Earliest], unknown or
	// no longer retained, the backlog holds every retained event.
	//
	// A replay is read a page at a time, whatever its length: what one
	// replay holds in memory at once, and reads from the store per call,
	// is bounded in bytes as well as in events (a page holds at least one
	// event, however large).
	Replay(ctx context.Context, lastEventID string) (Backlog, error)

	// Listen feeds l with every event appended from now on, by any hub
	// sharing the store, until cancel is called. A store that loses its
	// connection reports it to l.Status and resumes after the last event
	// it delivered, so that listeners see no repeat, and no gap unless it
	// calls l.Gap. A replicated store that finds, once connected again,
	// that its new primary lacks events it delivered (the replica taking
	// over had not received them) calls l.Rewound before any event of
	// the new primary's, never skipping nor repeating one silently.
	Listen(l Listener) (cancel func())
}

// Listener receives a store's live feed (see [Store.Listen]). The store
// calls its functions one at a time, never concurrently, possibly while
// holding a lock of its own: they must not call Listen or a cancel func
// of the store, nor wait for code that does.
type Listener struct {
	// Event is called with every event, in Seq order (with an
	// [InterestStore], every event of the listener's interest at least).
	// It must not block, nor change the event.
	Event func(*Event)
	// Status, if not nil, is called by a store whose feed can fail (one
	// on the network): with the error when the feed stops receiving
	// events, and with nil once it receives them again, before the
	// events appended meanwhile are passed to Event. The store retries
	// on its own; Status only reports.
	Status func(err error)
	// Gap, if not nil, is called when the feed skips events: they were
	// dropped from history before the store could pass them on (a feed
	// cut off, or lagging, for longer than retention covers), or the
	// store lost its data. It is called before the next event is passed.
	Gap func()
	// Rewound, if not nil, is called when the history no longer holds
	// events that the feed passed on: a failover to a replica that had
	// not received them, or a server restarted without its data. The
	// history now ends at the event head with id (0 and [Earliest] when
	// it is empty), and the events that follow may have Seqs at or below
	// those passed before. It is called before the next event is passed.
	// A listener must take it for a gap and forget every position after
	// head; Gap is called instead when Rewound is nil.
	Rewound func(head uint64, id string)
}

// InterestStore is implemented by stores whose feed can leave out the
// events that a listener does not need: on a store shared by many hubs,
// each serving the subscribers of a few topics, a hub then reads the
// updates of those topics rather than every update of every hub. A hub
// listens with ListenInterest and tells the store, as its streams open
// and end, the topics they select byte for byte (spec §Matcher Types:
// Exact Matching), and its own; a stream with any other matcher (a URL
// pattern, "*") needs every event.
type InterestStore interface {
	Store
	// ListenInterest is [Store.Listen], and returns want, through which
	// the listener tells the store which events it needs. Until the first
	// call of want, it needs every event.
	//
	// The store passes l every event that its interest includes: every
	// event when All is set, otherwise every event with at least one of
	// its topics. It may pass others too (a store that cannot tell them
	// apart passes everything), always in Seq order, and reports their
	// gaps, outages and rewinds to l as [Store.Listen] says, with two
	// differences. Seqs jump over the events left out: a listener must
	// not take a jump for a gap. And the store calls l.Gap when retention
	// dropped events that the interest included before it could pass
	// them on: it may call it when it cannot tell (a Gap too many ends
	// streams that then resume, one too few loses events), and may learn
	// of the drop only after passing later events; it calls Gap as soon
	// as it knows, before the next event.
	//
	// A change of interest takes effect when want returns: every event
	// appended from then on that the new interest includes is passed on,
	// and the events that both the old and the new interest include are
	// passed on across the change without a break. An event appended
	// before want returned, of a topic that only the new interest
	// includes, may or may not be. So a hub tells the store of a new
	// topic before it registers the stream that needs it, and can be
	// lazy about topics it no longer needs.
	//
	// want must not wait for the network: it records the change, which
	// the store's feed applies. Calls are applied in their order; calls
	// after cancel are ignored. It must not be called from l's functions.
	ListenInterest(l Listener) (want func(Interest), cancel func())
}

// Interest is a change of the events a listener of an [InterestStore]
// needs: whether it needs every event, and the topics it needs now in
// addition to, or no longer among, those it held.
type Interest struct {
	// All is whether the listener needs every event from now on,
	// whatever its topics.
	All bool
	// Add and Remove are topics that the listener needs from now on, and
	// that it no longer needs; topics are compared byte for byte. Adding
	// a topic it holds, or removing one it does not, changes nothing.
	Add, Remove []string
}

// Backlog is what [Store.Replay] returns to a reconnecting subscriber.
type Backlog struct {
	// Cursor is the id of the event just before the first one of Events,
	// or [Earliest] when there is none: the value of the
	// Mercure-Last-Event-ID header (spec §Reconnection, State
	// Reconciliation, and Event Sourcing), known before any event is read.
	Cursor string
	// Head is the Seq of the latest event appended to the store when the
	// replay began, 0 if none. Events from the live feed up to Head were
	// either replayed or precede the cursor, so the hub drops them: a feed
	// that lags behind Append then repeats nothing.
	Head uint64
	// Events yields the events after the cursor in sequence order, up to
	// Head, without skipping one: when events it has yet to yield are
	// dropped from history meanwhile, it ends with an error wrapping
	// [ErrHistoryGap] rather than skip them. It may end with any other
	// error too.
	Events iter.Seq2[*Event, error]
}

// LatestStore is implemented by stores whose history outlives a hub (a
// durable store, or one shared by several hubs): a new hub reads the id
// of the latest recorded update from it, so that its last event id is
// right from the start (spec §Reconnection, State Reconciliation, and
// Event Sourcing). [Latest] keeps it for a store.
type LatestStore interface {
	Store
	// LatestID returns the id of the latest recorded event, or [Earliest]
	// when there is none. It must not block.
	LatestID() string
}

// SubscriptionStore is implemented by stores shared by several hubs that
// also share the hubs' active subscriptions (spec §Active Subscriptions:
// Subscription API): a hub that has them on reports its own to the store,
// and lists those of every hub from it.
type SubscriptionStore interface {
	Store
	// UpdateSubscriptions records changes of this hub's subscriptions, in
	// order: one whose Active is true is added (or replaced), one whose
	// Active is false is removed. It returns once every hub sharing the
	// store lists the changes, or with an error (ctx's, or the store's,
	// which then keeps them and applies them when it can). The hub calls
	// it before it appends a subscription's start event and before its
	// end event, so that no hub dispatches an event that its listing
	// contradicts.
	UpdateSubscriptions(ctx context.Context, subs []Subscription) error
	// Subscriptions returns the active subscriptions of every hub sharing
	// the store, in any order. Those of a hub that stopped without
	// removing them must expire.
	Subscriptions(ctx context.Context) ([]Subscription, error)
}

// Subscription is an active subscription as a [SubscriptionStore] shares
// it: its id, and the hub's JSON document of it, which the store keeps
// and lists as the same JSON value.
type Subscription struct {
	// ID identifies the subscription among those of every hub.
	ID string
	// Active is true for a subscription added, false for one removed.
	Active bool
	// JSON is the subscription's document; nil when Active is false.
	JSON json.RawMessage
}

// An OutboxStore records updates that do not go through the hub, such as
// those an application writes in its own database transaction (package
// pgstore's PublishTx). A hub attaches itself to it when it starts, so
// that the store checks those updates with the hub's rules and the hub
// counts them, and detaches itself when it shuts down.
type OutboxStore interface {
	Store
	// AttachHub gives the store the hub's link, until detach is called.
	AttachHub(link HubLink) (detach func())
}

// HubLink is what a hub lends an [OutboxStore].
type HubLink struct {
	// Validate reports why the hub would refuse to publish e's update
	// (spec §Publication), or nil.
	Validate func(e *Event) error
	// Published counts an update the store recorded for the application.
	Published func()
}
