// Package memring is the memory store's implementation: a ring buffer of
// the most recent events of a history. Package memstore is its public
// face, which validates its options; the hub uses it directly for its
// default store.
package memring

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mercurekit/mercure/internal/sse"
	"github.com/mercurekit/mercure/store"
)

// Defaults of the memory store.
const (
	DefaultMaxEvents = 1000
	DefaultMaxBytes  = 64 << 20
)

// Config is a ring's configuration, valid: its callers check it.
type Config struct {
	MaxEvents   int           // ≥ 0; 0 keeps no history
	MaxBytes    int64         // as estimated by retainedBytes; 0: no bound
	RetryWindow time.Duration // ≥ 0; 0 records every append
}

// Ring is a memory store (see [store.Store]).
type Ring struct {
	mu        sync.RWMutex
	ring      []*store.Event // ring[(start+i)%len(ring)] is the i-th retained event
	start, n  int
	bytes     int64 // retained, as estimated by retainedBytes
	maxBytes  int64 // 0: no limit
	window    time.Duration
	nextSeq   uint64
	ids       map[string]idRef
	listeners map[*store.Listener]struct{}
}

// idRef locates the oldest retained event with a given id (REC-7), and
// the latest, which a retry is compared with.
type idRef struct {
	seq   uint64
	count int // retained events sharing the id
	last  *store.Event
}

// Replays read the ring a page at a time, so that a reader holds at most
// a page of events that eviction dropped meanwhile.
const (
	pageEvents = 512
	pageBytes  = 1 << 20 // as estimated by retainedBytes
)

// New returns an empty ring configured by c.
func New(c Config) *Ring {
	return &Ring{
		ring:      make([]*store.Event, c.MaxEvents),
		maxBytes:  c.MaxBytes,
		window:    c.RetryWindow,
		nextSeq:   1,
		ids:       make(map[string]idRef),
		listeners: make(map[*store.Listener]struct{}),
	}
}

// retainedBytes estimates what e keeps of the heap: its data, its topics
// and its encoding, which the hubs that deliver it hold while it is
// recent.
func retainedBytes(e *store.Event) int64 {
	retry := int64(-1)
	if e.Retry != nil {
		retry = e.Retry.Milliseconds()
	}
	n := len(e.Data) + sse.EncodedLen(e.ID, e.Type, retry, e.Data) + len(e.ID) + len(e.Type)
	for _, t := range e.Topics {
		n += len(t)
	}
	return int64(n)
}

// Append implements [store.Store]. Listeners run before it returns, under
// the ring's lock, which keeps delivery in sequence order.
func (s *Ring) Append(_ context.Context, e *store.Event) error {
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
// with its id (see [store.Store.Append]).
func (s *Ring) isRetry(e, last *store.Event) bool {
	return s.window > 0 && e.Time.Sub(last.Time) <= s.window && e.SameUpdate(last)
}

func (s *Ring) evictOldest() {
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

func (s *Ring) at(i int) *store.Event { return s.ring[(s.start+i)%len(s.ring)] }

// Replay implements [store.Store]. It resolves the cursor and Head at
// once, then reads the ring a page at a time (512 events, about 1 MiB),
// each page under the lock: a replay holds no more of the history than a
// page, even of events evicted under it. Since the oldest events go
// first, a page that no longer starts at the next event expected reveals
// events evicted before the replay reached them: Events then ends with an
// error wrapping [store.ErrHistoryGap].
func (s *Ring) Replay(_ context.Context, lastEventID string) (store.Backlog, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := store.Backlog{Cursor: store.Earliest, Head: s.nextSeq - 1}
	next := b.Head + 1 // the Seq that Events yields first
	if s.n > 0 {
		next = s.at(0).Seq
	}
	if ref, ok := s.ids[lastEventID]; ok && lastEventID != store.Earliest {
		b.Cursor, next = lastEventID, ref.seq+1
	}
	head := b.Head
	b.Events = func(yield func(*store.Event, error) bool) {
		var page []*store.Event
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
func (s *Ring) page(p []*store.Event, next, head uint64) ([]*store.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.n == 0 || s.at(0).Seq > next {
		return nil, fmt.Errorf("mercure: memory store: replay at Seq %d: %w", next, store.ErrHistoryGap)
	}
	var bytes int64
	for i := int(next - s.at(0).Seq); i < s.n && len(p) < pageEvents; i++ {
		e := s.at(i)
		if e.Seq > head || len(p) > 0 && bytes+retainedBytes(e) > pageBytes {
			break
		}
		bytes += retainedBytes(e)
		p = append(p, e)
	}
	return p, nil
}

// Listen implements [store.Store]. Its feed never fails: l.Status is not
// used.
func (s *Ring) Listen(l store.Listener) (cancel func()) {
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
