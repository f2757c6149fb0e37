// Package seqcheck checks what a subscriber received, over all its
// connections, against the store's order: nothing lost unless the hub
// reported a gap, nothing twice, nothing out of order.
//
// A subscriber behaves as an EventSource: its first connection opens
// without a cursor (the hub answers with its position, an id-only
// block), and each next one resumes with the last id it saw
// (Last-Event-ID); the hub answers with Mercure-Last-Event-ID, the
// cursor it resumed from. A hub reports a gap by ending the stream and
// answering the resume with another cursor than the one requested
// (spec §Reconnection, State Reconciliation, and Event Sourcing).
package seqcheck

import "fmt"

// Earliest is the cursor before the first event.
const Earliest = "earliest"

// Conn is what one connection of a subscriber got.
type Conn struct {
	// Requested is the Last-Event-ID the connection sent, "" for none.
	Requested string
	// Cursor is where the hub said the connection starts: the
	// Mercure-Last-Event-ID it answered a resume with, or the position
	// block it opened a stream without cursor with.
	Cursor string
	// IDs are the ids of the events received, in order.
	IDs []string
}

// Result sums up one subscriber, or many (see Add).
type Result struct {
	// Delivered counts the distinct events received.
	Delivered int
	// Gaps counts the resumes the hub answered with another cursor than
	// the one asked for; LostWithGap the events skipped at them, and
	// Redelivered the events received again after them (the client,
	// told of the gap, reconciles).
	Gaps, LostWithGap, Redelivered int
	// Vanished counts the events received, and positions given, that
	// the store's order no longer holds (a failover to a replica that
	// lacked them), or holds elsewhere (recorded again by a retry), each
	// on a connection whose next resume the hub answered with a gap: the
	// subscriber was told.
	Vanished int
	// LostSilently counts the events skipped with no gap reported,
	// Duplicates those received twice with no gap reported, Unknown the
	// ids not in the store's order, and not vanished; each must be 0.
	LostSilently, Duplicates, Unknown int
	// Missing counts the events up to the one the subscriber had to
	// reach that it never received (after its last one).
	Missing int
	// Errors describes the first few faults.
	Errors []string
}

// OK reports whether nothing was lost silently, received twice, unknown
// or missing.
func (r *Result) OK() bool {
	return r.LostSilently == 0 && r.Duplicates == 0 && r.Unknown == 0 && r.Missing == 0
}

// Add adds o's counts to r.
func (r *Result) Add(o Result) {
	r.Delivered += o.Delivered
	r.Gaps += o.Gaps
	r.LostWithGap += o.LostWithGap
	r.Redelivered += o.Redelivered
	r.Vanished += o.Vanished
	r.LostSilently += o.LostSilently
	r.Duplicates += o.Duplicates
	r.Unknown += o.Unknown
	r.Missing += o.Missing
	for _, e := range o.Errors {
		r.errorf("%s", e)
	}
}

func (r *Result) errorf(format string, args ...any) {
	if len(r.Errors) < 10 {
		r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
	}
}

// Order is the store's order: ids, unique, as the store holds them,
// those the subscriber should receive marked relevant.
type Order struct {
	index map[string]int
	rel   []bool
	cum   []int // cum[i]: the relevant events before the i-th
}

// NewOrder indexes ids; relevant selects those the subscriber should
// receive (nil: all).
func NewOrder(ids []string, relevant func(id string) bool) Order {
	o := Order{index: make(map[string]int, len(ids)), rel: make([]bool, len(ids)), cum: make([]int, len(ids)+1)}
	for i, id := range ids {
		o.index[id] = i
		o.rel[i] = relevant == nil || relevant(id)
		o.cum[i+1] = o.cum[i]
		if o.rel[i] {
			o.cum[i+1]++
		}
	}
	return o
}

// between counts the relevant events from the a-th to before the b-th.
func (o Order) between(a, b int) int {
	if b <= a {
		return 0
	}
	return o.cum[b] - o.cum[a]
}

// after returns the index of the first event after cursor, and whether
// cursor is known.
func (o Order) after(cursor string) (int, bool) {
	if cursor == Earliest {
		return 0, true
	}
	i, ok := o.index[cursor]
	return i + 1, ok
}

// Check checks the connections of one subscriber against the store's
// order o. until is the id the subscriber had to reach ("" for none):
// the events up to it after the last one received are Missing.
func Check(o Order, conns []Conn, until string) Result {
	var r Result
	last := -1 // the latest event received or skipped, by index
	seen := map[int]bool{}
	for n, c := range conns {
		// told: the next connection resumed with a gap reported, so that
		// what this one got may have vanished from the store.
		told := n+1 < len(conns) && conns[n+1].Requested != "" && conns[n+1].Cursor != conns[n+1].Requested
		// buried: told, though the store holds the cursor asked for: the
		// hub took it for one that vanished, whose update was recorded
		// again (a publisher's retry) at another place in the order.
		// What this connection got of the history that vanished may then
		// be in another order than the store's.
		_, held := o.index[conns[min(n+1, len(conns)-1)].Requested]
		buried := told && held
		start, ok := o.after(c.Cursor)
		gap := c.Requested != "" && c.Cursor != c.Requested
		fresh := c.Requested == "" && n > 0
		switch {
		case ok:
		case told:
			// Its position vanished: it promises nothing before its
			// first event still in the store.
			r.Vanished++
			start, fresh, gap = len(o.rel), n > 0, false
			for _, id := range c.IDs {
				if i, ok := o.index[id]; ok {
					start = i
					break
				}
			}
		default:
			r.Unknown++
			r.errorf("connection %d: cursor %q is not in the store", n, c.Cursor)
			continue
		}
		switch {
		case n == 0:
			last = start - 1 // it promises nothing about what came before it
		case fresh:
			// A new stream, not a resume: it promises nothing about
			// what came before it.
			last = max(last, start-1)
		case gap:
			r.Gaps++
			r.LostWithGap += o.between(last+1, start)
			last = max(last, start-1)
		case o.between(last+1, start) > 0:
			k := o.between(last+1, start)
			r.LostSilently += k
			r.errorf("connection %d: resumed at %q after event %d: %d events skipped, no gap reported", n, c.Cursor, last, k)
			last = start - 1
		}
		next := start
		for _, id := range c.IDs {
			i, ok := o.index[id]
			switch {
			case !ok && told, ok && buried && (i < next || o.between(next, i) > 0):
				r.Vanished++
				continue
			case !ok || !o.rel[i]:
				r.Unknown++
				r.errorf("connection %d: event %q is not in the store, or not for this subscriber", n, id)
				continue
			case i < next:
				r.Duplicates++
				r.errorf("connection %d: got %q (event %d) again or out of order, want one after event %d", n, id, i, next-1)
				continue
			case o.between(next, i) > 0:
				k := o.between(next, i)
				r.LostSilently += k
				r.errorf("connection %d: got %q (event %d): %d skipped before it", n, id, i, k)
			}
			if seen[i] {
				if gap || fresh {
					r.Redelivered++
				} else {
					r.Duplicates++
					r.errorf("connection %d: got %q (event %d) twice", n, id, i)
				}
			} else {
				seen[i] = true
				r.Delivered++
			}
			next = i + 1
			last = max(last, i)
		}
	}
	if until != "" {
		if u, ok := o.index[until]; !ok {
			r.Unknown++
			r.errorf("the last event %q is not in the store", until)
		} else if k := o.between(last+1, u+1); k > 0 {
			r.Missing += k
			r.errorf("%d events up to %q never came (last received: event %d)", k, until, last)
		}
	}
	return r
}
