package mercure

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/sse"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// Earliest is the cursor that names the start of the retained history
// (spec §Reconnection, State Reconciliation, and Event Sourcing). No update
// can have it as its id (spec §Publication).
const Earliest = "earliest"

// Event is an update as the hub records and delivers it: the update with
// its final id, its position in the hub-wide sequence and its publication
// time. Events are immutable once appended; several hubs may share one.
type Event struct {
	Update
	// Seq is the event's position in the hub-wide sequence, set by
	// [Store.Append]. It is one total order shared by every hub using the
	// store, the same in Replay and Listen, strictly increasing in the
	// order listeners see events, and never 0: a new stream drops the live
	// events whose Seq its replay already covered.
	Seq uint64
	// Time is when the hub accepted the update.
	Time time.Time

	// sse caches the event's SSE encoding, shared by every subscriber. The
	// publishing hub sets it before Append; a hub receiving the event from
	// another instance computes it on first use.
	sse atomic.Pointer[[]byte]
	// resolved caches the topics resolved as URLs, shared with the
	// engine's view of the event.
	resolved topicurl.Cache
}

// fill sets ev, the engine's view of e, once e.Seq is set by the store.
// The view shares e's encoding and its cache of resolved topics; each hub
// has views of its own (the engine counts the queues holding one).
func (e *Event) fill(ev *engine.Event) {
	ev.Seq, ev.ID, ev.Topics, ev.Private, ev.Time = e.Seq, e.ID, e.Topics, e.Private, e.Time
	ev.Bytes, ev.Resolved = e.encoded(), &e.resolved
}

// encoded returns the event's SSE bytes, encoding them on first use.
// Concurrent first uses may both encode; either result is kept.
func (e *Event) encoded() []byte {
	if b := e.sse.Load(); b != nil {
		return *b
	}
	retry := int64(-1)
	if e.Retry != nil {
		retry = e.Retry.Milliseconds()
	}
	b := make([]byte, 0, sse.EncodedLen(e.ID, e.Type, retry, e.Data))
	b = sse.AppendEvent(b, e.ID, e.Type, retry, e.Data)
	e.sse.Store(&b)
	return b
}

// A Store keeps the history of updates and feeds every update, from any
// hub sharing the store, to those hubs' subscribers. It is the seam between
// one process and many: the in-memory store serves one hub; a shared store
// (Redis Streams, say) lets several app instances act as one hub.
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
	// latest retained event with its ID (the same ID, Topics, Data,
	// Private, Type and Retry, recorded at most the store's retry window
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
	// calls l.Gap.
	Listen(l Listener) (cancel func())
}

// Listener receives a store's live feed (see [Store.Listen]). The store
// calls its functions one at a time, never concurrently, possibly while
// holding a lock of its own: they must not call Listen or a cancel func
// of the store, nor wait for code that does.
type Listener struct {
	// Event is called with every event, in Seq order. It must not block.
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
}

// LatestStore is implemented by stores whose history outlives a hub (a
// durable store, or one shared by several hubs): [New] reads the id of
// the latest recorded update from it, so that [Hub.LastEventID] is right
// from the start (spec §Reconnection, State Reconciliation, and Event
// Sourcing).
type LatestStore interface {
	Store
	// LatestID returns the id of the latest recorded event, or [Earliest]
	// when there is none. It must not block.
	LatestID() string
}

// SubscriptionStore is implemented by stores shared by several hubs that
// also share the hubs' active subscriptions: a hub with
// [WithSubscriptions] reports its own to the store, and lists those of
// every hub from it, so that the subscriptions API of any instance shows
// all of them (spec §Active Subscriptions: Subscription API).
type SubscriptionStore interface {
	Store
	// UpdateSubscriptions records changes of this hub's subscriptions, in
	// order: one whose Active is true is added (or replaced), one whose
	// Active is false is removed. It returns once every hub sharing the
	// store lists the changes, or with an error (ctx's, or the store's,
	// which then keeps them and applies them when it can). The hub calls
	// it before it appends a subscription's start event and before its
	// end event, so that no hub dispatches an event that its listing
	// contradicts (spec §Active Subscriptions: Subscription API).
	UpdateSubscriptions(ctx context.Context, subs []Subscription) error
	// Subscriptions returns the active subscriptions of every hub sharing
	// the store, in any order. Those of a hub that stopped without
	// removing them must expire.
	Subscriptions(ctx context.Context) ([]Subscription, error)
}

// DefaultRetryWindow is how long the stores of this module take an
// update sent again for a retry of the one recorded (see [Store.Append]),
// unless configured otherwise: a publisher whose POST or [Hub.Publish]
// failed or got no answer may send the same update again within that time
// without it being recorded twice. Only updates with an id of the
// publisher's can be recognised: one sent without an id gets a new one
// each time, and a retry of it is another update. A publisher that wants
// safe retries gives each update an id of its own.
const DefaultRetryWindow = 10 * time.Minute

// An OutboxStore records updates that do not go through the hub, such as
// those an application writes in its own database transaction (package
// pgstore's PublishTx). [New] attaches the hub to it, so that the store
// checks those updates with the hub's rules and the hub counts them;
// [Hub.Shutdown] detaches it.
type OutboxStore interface {
	Store
	// AttachHub gives the store the hub's link, until detach is called.
	AttachHub(link HubLink) (detach func())
}

// HubLink is what a hub lends an [OutboxStore].
type HubLink struct {
	// Validate reports why the hub would refuse u: [Hub.Validate].
	Validate func(u Update) error
	// Published counts an update the store recorded for the application
	// (source "tx" of [Metrics.UpdatesPublished]).
	Published func()
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

// MemoryStore is the default [Store]: a ring buffer of the most recent
// events of one hub. The zero value is not usable; call [NewMemoryStore].
type MemoryStore struct {
	mu        sync.RWMutex
	ring      []*Event // ring[(start+i)%len(ring)] is the i-th retained event
	start, n  int
	bytes     int64 // retained, as estimated by retainedBytes
	maxBytes  int64 // 0: no limit
	window    time.Duration
	nextSeq   uint64
	ids       map[string]idRef
	listeners map[*Listener]struct{}
}

// idRef locates the oldest retained event with a given id (REC-7), and
// the latest, which a retry is compared with.
type idRef struct {
	seq   uint64
	count int // retained events sharing the id
	last  *Event
}

// Replays read the ring a page at a time, so that a reader holds at most
// a page of events that eviction dropped meanwhile.
const (
	memoryPageEvents = 512
	memoryPageBytes  = 1 << 20 // as estimated by retainedBytes
)

// A MemoryOption configures a [MemoryStore]. Like an [Option], it
// validates its argument: a bad value makes [NewMemoryStore] fail.
type MemoryOption func(*MemoryStore) error

// MemoryMaxBytes bounds the memory that a [MemoryStore]'s history takes,
// as estimated from its events' data, topics and encoding: the oldest
// events are dropped to stay within n bytes, the latest one is always
// kept. 0, the default, leaves the count of events as the only bound;
// a negative n is an error.
func MemoryMaxBytes(n int64) MemoryOption {
	return func(s *MemoryStore) error {
		if n < 0 {
			return fmt.Errorf("%w: MemoryMaxBytes(%d) is negative", ErrInvalidOption, n)
		}
		s.maxBytes = n
		return nil
	}
}

// MemoryRetryWindow sets how long after an update was recorded the same
// update appended again is taken for a retry and not recorded twice (see
// [Store.Append]); 0 records every append. The default is
// [DefaultRetryWindow]; a negative d is an error.
func MemoryRetryWindow(d time.Duration) MemoryOption {
	return func(s *MemoryStore) error {
		if d < 0 {
			return fmt.Errorf("%w: MemoryRetryWindow(%v) is negative", ErrInvalidOption, d)
		}
		s.window = d
		return nil
	}
}

// NewMemoryStore returns a store that retains the last size events; with
// size 0 it keeps none and only feeds live updates. It fails with an
// error wrapping [ErrInvalidOption] when size is negative or an option
// is invalid.
func NewMemoryStore(size int, opts ...MemoryOption) (*MemoryStore, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: memory store size %d is negative", ErrInvalidOption, size)
	}
	s := &MemoryStore{
		ring:      make([]*Event, size),
		window:    DefaultRetryWindow,
		nextSeq:   1,
		ids:       make(map[string]idRef),
		listeners: make(map[*Listener]struct{}),
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil MemoryOption", ErrInvalidOption)
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// retainedBytes estimates what e keeps of the heap: its data, its topics
// and its encoding.
func retainedBytes(e *Event) int64 {
	n := len(e.Data) + len(e.encoded()) + len(e.ID) + len(e.Type)
	for _, t := range e.Topics {
		n += len(t)
	}
	return int64(n)
}

// Append implements [Store]. Listeners run before it returns, under the
// store's lock, which keeps delivery in sequence order.
func (s *MemoryStore) Append(_ context.Context, e *Event) error {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref, ok := s.ids[e.ID]; ok && s.isRetry(e, ref.last) {
		e.Seq = ref.last.Seq
		return nil
	}
	e.Seq = s.nextSeq
	s.nextSeq++
	if len(s.ring) > 0 {
		size := retainedBytes(e)
		for s.n == len(s.ring) || s.maxBytes > 0 && s.n > 0 && s.bytes+size > s.maxBytes {
			s.evictOldest()
		}
		s.ring[(s.start+s.n)%len(s.ring)] = e
		s.n++
		s.bytes += size
		if ref, ok := s.ids[e.ID]; ok {
			ref.count++
			ref.last = e
			s.ids[e.ID] = ref
		} else {
			s.ids[e.ID] = idRef{seq: e.Seq, count: 1, last: e}
		}
	}
	for l := range s.listeners {
		l.Event(e)
	}
	return nil
}

// isRetry tells whether e is a retry of last, the latest retained event
// with its id (see [Store.Append]).
func (s *MemoryStore) isRetry(e, last *Event) bool {
	return s.window > 0 && e.Time.Sub(last.Time) <= s.window && sameUpdate(&e.Update, &last.Update)
}

// sameUpdate reports whether a and b are the same update: the same ID,
// Topics (in the same order), Data, Private, Type and Retry.
func sameUpdate(a, b *Update) bool {
	return a.ID == b.ID && a.Data == b.Data && a.Private == b.Private && a.Type == b.Type &&
		slices.Equal(a.Topics, b.Topics) &&
		(a.Retry == nil) == (b.Retry == nil) && (a.Retry == nil || *a.Retry == *b.Retry)
}

func (s *MemoryStore) evictOldest() {
	old := s.ring[s.start]
	s.ring[s.start] = nil
	s.start = (s.start + 1) % len(s.ring)
	s.n--
	s.bytes -= retainedBytes(old)
	ref := s.ids[old.ID]
	if ref.count == 1 {
		delete(s.ids, old.ID)
		return
	}
	ref.count--
	if ref.seq == old.Seq {
		// A later duplicate of this id is now the oldest: find it. Only
		// publishers reusing ids pay for this scan.
		for i := 0; i < s.n; i++ {
			if e := s.at(i); e.ID == old.ID {
				ref.seq = e.Seq
				break
			}
		}
	}
	s.ids[old.ID] = ref
}

func (s *MemoryStore) at(i int) *Event { return s.ring[(s.start+i)%len(s.ring)] }

// Replay implements [Store]. It resolves the cursor and Head at once, then
// reads the ring a page at a time (512 events, about 1 MiB), each page
// under the lock: a replay holds no more of the history than a page, even
// of events evicted under it. Since the oldest events go first, a page
// that no longer starts at the next event expected reveals events evicted
// before the replay reached them: Events then ends with an error wrapping
// [ErrHistoryGap].
func (s *MemoryStore) Replay(_ context.Context, lastEventID string) (Backlog, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := Backlog{Cursor: Earliest, Head: s.nextSeq - 1}
	next := b.Head + 1 // the Seq that Events yields first
	if s.n > 0 {
		next = s.at(0).Seq
	}
	if ref, ok := s.ids[lastEventID]; ok && lastEventID != Earliest {
		b.Cursor, next = lastEventID, ref.seq+1
	}
	head := b.Head
	b.Events = func(yield func(*Event, error) bool) {
		var page []*Event
		for next := next; next <= head; {
			var err error
			if page, err = s.page(page[:0], next, head); err != nil {
				yield(nil, err)
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			next = page[len(page)-1].Seq + 1
			clear(page) // hold nothing evicted while yielding the next page
		}
	}
	return b, nil
}

// page appends to p the retained events from Seq next on, up to head, at
// most a page of them.
func (s *MemoryStore) page(p []*Event, next, head uint64) ([]*Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.n == 0 || s.at(0).Seq > next {
		return nil, fmt.Errorf("mercure: memory store: replay at Seq %d: %w", next, ErrHistoryGap)
	}
	var bytes int64
	for i := int(next - s.at(0).Seq); i < s.n && len(p) < memoryPageEvents; i++ {
		e := s.at(i)
		if e.Seq > head || len(p) > 0 && bytes+retainedBytes(e) > memoryPageBytes {
			break
		}
		bytes += retainedBytes(e)
		p = append(p, e)
	}
	return p, nil
}

// Listen implements [Store]. Its feed never fails: l.Status is not used.
func (s *MemoryStore) Listen(l Listener) (cancel func()) {
	p := &l
	s.mu.Lock()
	s.listeners[p] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.listeners, p)
		s.mu.Unlock()
	}
}
