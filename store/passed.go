package store

import "time"

// PassedCap is how many of the events its feed passed on a [Passed]
// remembers: the ids of as many that a failover lost are known (see
// [Listener].Rewound). A replica that lags that far behind its primary
// is about to be dropped by it.
const PassedCap = 1024

// PassedEvent is an event a store's feed passed on, as [Passed] keeps it.
type PassedEvent struct {
	Seq  uint64
	ID   string
	Time time.Time
}

// Passed keeps the last [PassedCap] events a store's feed passed on, so
// that after a rewind of its history the store can tell which of them
// the history lost: their ids must be unknown cursors from then on,
// since a client that got one would otherwise resume after a retry of
// the same update that the new history recorded later, past updates it
// never got. The zero value holds none. It is not safe for concurrent
// use: the feed's goroutine owns it.
type Passed struct {
	events [PassedCap]PassedEvent
	next   int // where the next goes
	n      int // how many it holds
}

// Add records that the feed passed on the event seq, with id and time t.
func (p *Passed) Add(seq uint64, id string, t time.Time) {
	p.events[p.next] = PassedEvent{seq, id, t}
	p.next = (p.next + 1) % PassedCap
	p.n = min(p.n+1, PassedCap)
}

// After returns the events it holds with a Seq after seq, newest first.
func (p *Passed) After(seq uint64) []PassedEvent {
	var out []PassedEvent
	for k := 1; k <= p.n; k++ {
		e := p.events[(p.next-k+PassedCap)%PassedCap]
		if e.Seq <= seq {
			break // in Seq order
		}
		out = append(out, e)
	}
	return out
}

// Forget drops the events with a Seq after seq.
func (p *Passed) Forget(seq uint64) {
	for p.n > 0 {
		i := (p.next - 1 + PassedCap) % PassedCap
		if p.events[i].Seq <= seq {
			return
		}
		p.events[i] = PassedEvent{}
		p.next, p.n = i, p.n-1
	}
}
