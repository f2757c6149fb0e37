// Package fanout is the listener set of a store whose live feed comes
// from the network (redisstore, pgstore): it passes the feed's events,
// gaps and state changes to the listeners one call at a time, and keeps
// from a listener the events that the store appended before it was added.
//
// It does not import the root package: E is the store's event type, and a
// store adds a mercure.Listener's funcs.
package fanout

import (
	"sync"
	"sync/atomic"
)

// Listeners is a store's listener set; the zero value is empty.
type Listeners[E any] struct {
	// appended is the highest seq the store appended: a listener added
	// later skips the events up to it, which Append returned before the
	// listener was added.
	appended atomic.Uint64

	mu  sync.Mutex // serialises the listeners' calls
	set map[*listener[E]]struct{}
	err error // non-nil while the feed fails
}

type listener[E any] struct {
	event  func(E)
	status func(error)
	gap    func()
	after  uint64 // skip events with seq <= after
}

// Appended records that the store appended the event seq.
func (ls *Listeners[E]) Appended(seq uint64) {
	for {
		cur := ls.appended.Load()
		if cur >= seq || ls.appended.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Add adds a listener; status and gap may be nil. A listener added while
// the feed fails is told at once. The returned func removes it.
func (ls *Listeners[E]) Add(event func(E), status func(error), gap func()) (remove func()) {
	ls.mu.Lock()
	l := &listener[E]{event: event, status: status, gap: gap, after: ls.appended.Load()}
	if ls.set == nil {
		ls.set = make(map[*listener[E]]struct{})
	}
	ls.set[l] = struct{}{}
	if ls.err != nil && status != nil {
		status(ls.err)
	}
	ls.mu.Unlock()
	return func() {
		ls.mu.Lock()
		delete(ls.set, l)
		ls.mu.Unlock()
	}
}

// Deliver passes e, the event seq, to the listeners added before the
// store appended it.
func (ls *Listeners[E]) Deliver(seq uint64, e E) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for l := range ls.set {
		if seq > l.after {
			l.event(e)
		}
	}
}

// Gap tells the listeners that the feed skipped events.
func (ls *Listeners[E]) Gap() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for l := range ls.set {
		if l.gap != nil {
			l.gap()
		}
	}
}

// Status reports the feed's state: err when it fails, nil when it works
// again; only changes reach the listeners.
func (ls *Listeners[E]) Status(err error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if (err == nil) == (ls.err == nil) {
		return
	}
	ls.err = err
	for l := range ls.set {
		if l.status != nil {
			l.status(err)
		}
	}
}
