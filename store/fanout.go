package store

import (
	"sync"
	"sync/atomic"
)

// Fanout is the listener set of a store whose live feed comes from the
// network (redisstore, pgstore): it passes the feed's events, gaps and
// state changes to the listeners one call at a time, as [Listener]
// requires, and keeps from a listener the events that the store appended
// before it was added. The zero value is empty and ready to use.
type Fanout struct {
	// appended is the highest Seq the store appended: a listener added
	// later skips the events up to it, which Append returned before the
	// listener was added.
	appended atomic.Uint64

	mu  sync.Mutex // serialises the listeners' calls
	set map[*fanoutListener]struct{}
	err error // non-nil while the feed fails
}

type fanoutListener struct {
	Listener
	after uint64 // skip events with Seq <= after
}

// Appended records that the store's Append recorded the event seq.
func (f *Fanout) Appended(seq uint64) {
	for {
		cur := f.appended.Load()
		if cur >= seq || f.appended.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Add adds l, as [Store.Listen] does; a listener added while the feed
// fails is told at once. The returned func removes it.
func (f *Fanout) Add(l Listener) (remove func()) {
	f.mu.Lock()
	fl := &fanoutListener{Listener: l, after: f.appended.Load()}
	if f.set == nil {
		f.set = make(map[*fanoutListener]struct{})
	}
	f.set[fl] = struct{}{}
	if f.err != nil && l.Status != nil {
		l.Status(f.err)
	}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.set, fl)
		f.mu.Unlock()
	}
}

// Deliver passes e to the listeners added before the store appended it.
func (f *Fanout) Deliver(e *Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.set {
		if e.Seq > l.after {
			l.Event(e)
		}
	}
}

// Gap tells the listeners that the feed skipped events.
func (f *Fanout) Gap() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.set {
		if l.Gap != nil {
			l.Gap()
		}
	}
}

// Rewind tells the listeners that the history lost events the feed
// passed on and now ends at the event head with id (see
// [Listener].Rewound): those without Rewound get a Gap. Events the store
// appends from now on reach every listener, whatever Seqs were passed
// before.
func (f *Fanout) Rewind(head uint64, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appended.Store(head)
	for l := range f.set {
		l.after = min(l.after, head)
		switch {
		case l.Rewound != nil:
			l.Rewound(head, id)
		case l.Gap != nil:
			l.Gap()
		}
	}
}

// Status reports the feed's state: err when it fails, nil when it works
// again; only changes reach the listeners.
func (f *Fanout) Status(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if (err == nil) == (f.err == nil) {
		return
	}
	f.err = err
	for l := range f.set {
		if l.Status != nil {
			l.Status(err)
		}
	}
}
