// Package latest keeps the id of the latest event a shared store has
// seen, for its LatestID: events come from the store's appends and from
// its feed, concurrently and in any order.
package latest

import "sync/atomic"

// Event is the latest event seen; the zero value has seen none.
type Event struct{ p atomic.Pointer[event] }

type event struct {
	seq uint64
	id  string
}

// Seen records the event seq with id, unless one at least as late was.
func (l *Event) Seen(seq uint64, id string) {
	for {
		cur := l.p.Load()
		if cur != nil && cur.seq >= seq {
			return
		}
		if l.p.CompareAndSwap(cur, &event{seq, id}) {
			return
		}
	}
}

// ID returns the id of the latest event seen, or ok false if none.
func (l *Event) ID() (id string, ok bool) {
	if e := l.p.Load(); e != nil {
		return e.id, true
	}
	return "", false
}
