package store

import "sync/atomic"

// Latest keeps the id of the latest event a store has seen, for its
// LatestID (see [LatestStore]): events come from the store's appends and
// from its feed, concurrently and in any order. The zero value has seen
// none.
type Latest struct{ p atomic.Pointer[latestEvent] }

type latestEvent struct {
	seq uint64
	id  string
}

// Seen records the event seq with id, unless one at least as late was.
func (l *Latest) Seen(seq uint64, id string) {
	for {
		cur := l.p.Load()
		if cur != nil && cur.seq >= seq {
			return
		}
		if l.p.CompareAndSwap(cur, &latestEvent{seq, id}) {
			return
		}
	}
}

// ID returns the id of the latest event seen, or [Earliest] if none.
func (l *Latest) ID() string {
	if e := l.p.Load(); e != nil {
		return e.id
	}
	return Earliest
}

// Rewind records the event seq with id as the latest, or none when seq
// is 0: the history lost the events after it (see [Listener].Rewound).
func (l *Latest) Rewind(seq uint64, id string) {
	if seq == 0 {
		l.p.Store(nil)
		return
	}
	l.p.Store(&latestEvent{seq, id})
}
