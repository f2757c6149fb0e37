package mercure

import (
	"context"
	"sync"
	"time"
)

// Earliest is the cursor that names the start of the retained history
// (REC-6). No update can have it as its id (PUB-9).
const Earliest = "earliest"

// Event is an update as the hub records and delivers it: the update with
// its final id, its position in the hub-wide sequence and its publication
// time. Events are immutable once appended.
type Event struct {
	Update
	// Seq is the event's position in the hub-wide sequence, set by
	// [Store.Append]: strictly increasing in the order listeners see
	// events, and never 0.
	Seq uint64
	// Time is when the hub accepted the update.
	Time time.Time

	// encoded caches the SSE bytes; the publishing hub sets it before
	// Append, a hub receiving the event from another instance on first
	// delivery.
	encoded []byte
}

// A Store keeps the history of updates and feeds every update, from any
// hub sharing the store, to those hubs' subscribers. It is the seam between
// one process and many: the in-memory store serves one hub; a shared store
// (Redis Streams, say) lets several app instances act as one hub.
//
// Implementations must be safe for concurrent use.
type Store interface {
	// Append sets e.Seq, records e in the history and delivers it to
	// every listener of every hub sharing the store. When Append returns
	// nil, e is recorded: an accepted update is never lost.
	Append(ctx context.Context, e *Event) error

	// Replay calls fn, in sequence order, with each retained event that
	// follows the cursor lastEventID, until fn returns false. The cursor
	// resolves to the oldest retained event with that id (REC-7); when it
	// is [Earliest], unknown or no longer retained, every retained event
	// is replayed. Replay returns the id of the event just before the
	// first one it replays, or [Earliest] when there is none: the value
	// of the Mercure-Last-Event-ID header (REC-9).
	Replay(ctx context.Context, lastEventID string, fn func(*Event) bool) (cursor string, err error)

	// Listen calls fn with every event appended from now on, by any hub
	// sharing the store, one at a time and in Seq order, until cancel is
	// called. fn does not block.
	Listen(fn func(*Event)) (cancel func())
}

// MemoryStore is the default [Store]: a ring buffer of the most recent
// events of one hub. The zero value is not usable; call [NewMemoryStore].
type MemoryStore struct {
	mu        sync.RWMutex
	ring      []*Event // ring[(start+i)%len(ring)] is the i-th retained event
	start, n  int
	nextSeq   uint64
	ids       map[string]idRef
	listeners map[*listener]struct{}
}

// idRef locates the oldest retained event with a given id (REC-7).
type idRef struct {
	seq   uint64
	count int // retained events sharing the id
}

type listener struct{ fn func(*Event) }

// NewMemoryStore returns a store that retains the last size events; with
// size 0 it keeps none and only feeds live updates.
func NewMemoryStore(size int) *MemoryStore {
	if size < 0 {
		size = 0
	}
	return &MemoryStore{
		ring:      make([]*Event, size),
		nextSeq:   1,
		ids:       make(map[string]idRef),
		listeners: make(map[*listener]struct{}),
	}
}

// Append implements [Store]. Listeners run before it returns, under the
// store's lock, which keeps delivery in sequence order.
func (s *MemoryStore) Append(_ context.Context, e *Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Seq = s.nextSeq
	s.nextSeq++
	if len(s.ring) > 0 {
		if s.n == len(s.ring) {
			s.evictOldest()
		}
		s.ring[(s.start+s.n)%len(s.ring)] = e
		s.n++
		if ref, ok := s.ids[e.ID]; ok {
			ref.count++
			s.ids[e.ID] = ref
		} else {
			s.ids[e.ID] = idRef{seq: e.Seq, count: 1}
		}
	}
	for l := range s.listeners {
		l.fn(e)
	}
	return nil
}

func (s *MemoryStore) evictOldest() {
	old := s.ring[s.start]
	s.ring[s.start] = nil
	s.start = (s.start + 1) % len(s.ring)
	s.n--
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

// replayChunk bounds how many events Replay copies per lock hold, so a long
// replay never stalls publishers.
const replayChunk = 256

// Replay implements [Store].
func (s *MemoryStore) Replay(ctx context.Context, lastEventID string, fn func(*Event) bool) (string, error) {
	var chunk [replayChunk]*Event
	s.mu.RLock()
	cursor, next := Earliest, uint64(0)
	if ref, ok := s.ids[lastEventID]; ok && lastEventID != Earliest {
		cursor, next = lastEventID, ref.seq+1
	}
	for {
		if s.n == 0 {
			s.mu.RUnlock()
			return cursor, nil
		}
		first := s.at(0).Seq
		i := 0
		if next > first {
			i = int(next - first)
		}
		m := copy(chunk[:], s.window(i))
		s.mu.RUnlock()
		if m == 0 {
			return cursor, nil
		}
		for _, e := range chunk[:m] {
			if !fn(e) {
				return cursor, nil
			}
		}
		if err := ctx.Err(); err != nil {
			return cursor, err
		}
		next = chunk[m-1].Seq + 1
		clear(chunk[:m])
		s.mu.RLock()
	}
}

// window returns up to replayChunk retained events starting at position i,
// as one contiguous piece of the ring.
func (s *MemoryStore) window(i int) []*Event {
	if i >= s.n {
		return nil
	}
	from := (s.start + i) % len(s.ring)
	to := min(from+(s.n-i), len(s.ring), from+replayChunk)
	return s.ring[from:to]
}

// Listen implements [Store].
func (s *MemoryStore) Listen(fn func(*Event)) (cancel func()) {
	l := &listener{fn: fn}
	s.mu.Lock()
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}
}
