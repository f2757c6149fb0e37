package natsstore

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/store"
)

// Reading only what the hubs serve (see [store.InterestStore]): each
// event's subject ends with the hash of its topic, or "m" for an update
// with several topics, so the feed's consumer filters on NAME.*.HASH for
// each topic its listeners need, and NAME.*.m: updates with several
// topics always pass. When a listener needs everything (a stream with a
// URL pattern or *, a listener of Listen), or the topics are too many
// for one consumer (see maxFilters), the consumer reads everything.
//
// A change that needs more than the consumer reads (a new topic, or
// everything) stops the delivery of events at once, then creates the
// consumer again after the last event the feed passed on, reading
// everything: it reads again the events of the new topics that it left
// out since, so that a stream registered on a new topic after the
// change was made misses none of those after the hub's position. The
// feed narrows its consumer to the filter again once the interest has
// not grown for narrowAfter: a burst of new topics (a hub's subscribers
// all reconnecting) costs a consumer that reads everything for a while,
// cheap to create, rather than one filtered consumer per new topic,
// each of which the server takes longer to create the more subjects it
// has (about 2 ms for 100, 90 ms for 1,000, 1.3 s for 4,000: it
// compares them pairwise), and which a change during its creation
// would waste. A change that needs less waits for that narrowing too.
//
// Gaps: the server's filtered consumer skips the messages that retention
// dropped before it reached them, without a trace in the sequences it
// delivers, since those jump anyway. So the feed keeps a position,
// through, up to which every message its filter passes was delivered,
// and checks it against the stream's first message when it creates a
// consumer and every checkEvery: a first message past through+1 means
// that messages the filter may have passed were dropped, and the
// listeners get a Gap (possibly an unnecessary one: retention then
// overtook through, which lags the stream's head by about the server's
// pull expiry plus two checks). through moves on only when confirmed:
// the consumer's info gives the stream sequence it had scanned to and
// the messages it had sent; once the feed has passed all of those on,
// and the stream's first message, read later, shows that retention had
// not reached through, every message the filter passes up to the
// scanned sequence was delivered.

const (
	// maxFilters caps the subjects of the feed's consumer: past it, or
	// past maxFilterBytes of subjects (a request must fit in a message,
	// 1 MiB by default), the consumer reads everything. The server takes
	// about 90 ms to create a consumer with 1,000 subjects, during which
	// the feed passes nothing on.
	maxFilters     = 1024
	maxFilterBytes = 128 << 10
	// narrowAfter is how long the interest must not have grown before
	// the feed narrows a consumer that reads more than it needs.
	narrowAfter = time.Second
)

// interest is what the feed's listeners need, under Store.imu.
type interest struct {
	listeners int            // listeners of ListenInterest
	all       int            // listeners that need every event
	topics    map[string]int // topic hash → listeners needing it
	// changed is whether the consumer's filter is out of date: the feed
	// passes nothing more on until it has created its consumer again.
	changed bool
	// iter is the current consumer's, stopped by a change.
	iter jetstream.MessagesContext
	// current is the filter of the current consumer (nil: everything),
	// wide whether the next one is to read everything, and grown when
	// the interest last grew.
	current []string
	wide    bool
	grown   time.Time
	// running is the filter of the consumer delivering now, for tests.
	running []string
	// through is the last stream sequence up to which every message the
	// filter passes was passed on, or covered by a Gap (see above).
	through uint64
}

// interestListener is one listener's interest.
type interestListener struct {
	all    bool
	topics map[string]string // topic → hash
	gone   bool
}

// Listen implements [store.Store]. l's functions are called from the
// store's feed goroutine: l.Event one event at a time in Seq order,
// l.Status when the feed loses the servers and when it is back. Events
// this Store appended before Listen was called are not passed to
// l.Event. A listener added during an outage is told at once. l gets
// every event: its feed reads everything.
func (s *Store) Listen(l store.Listener) (cancel func()) {
	il := &interestListener{all: true}
	s.addInterest(il, false)
	remove := s.listeners.Add(l)
	return func() {
		remove()
		s.dropInterest(il)
	}
}

// ListenInterest implements [store.InterestStore]: the feed's consumer
// reads the events of the topics that the listeners need, and the
// updates with several topics; it reads everything while a listener
// needs everything, or while they need more than 4,096 topics.
func (s *Store) ListenInterest(l store.Listener) (want func(store.Interest), cancel func()) {
	il := &interestListener{all: true, topics: make(map[string]string)}
	s.addInterest(il, true)
	remove := s.listeners.Add(l)
	return func(in store.Interest) { s.want(il, in) }, func() {
		remove()
		s.dropInterest(il)
	}
}

func (s *Store) addInterest(il *interestListener, filtered bool) {
	s.imu.Lock()
	defer s.imu.Unlock()
	in := &s.interest
	if filtered {
		in.listeners++
	}
	in.all++
	s.grewLocked() // a listener that needs everything
}

func (s *Store) dropInterest(il *interestListener) {
	s.imu.Lock()
	defer s.imu.Unlock()
	if il.gone {
		return
	}
	il.gone = true
	in := &s.interest
	if il.topics != nil {
		in.listeners--
	}
	if il.all {
		in.all--
	}
	for _, h := range il.topics {
		in.lose(h)
	}
	// The consumer reads more than needed until the feed narrows it.
}

// want applies a listener's change of interest.
func (s *Store) want(il *interestListener, c store.Interest) {
	s.imu.Lock()
	defer s.imu.Unlock()
	if il.gone {
		return
	}
	in := &s.interest
	if c.All != il.all {
		il.all = c.All
		if c.All {
			in.all++
		} else {
			in.all--
		}
	}
	for _, t := range c.Add {
		if _, ok := il.topics[t]; !ok {
			h := hash(t)
			il.topics[t] = h
			if in.topics == nil {
				in.topics = make(map[string]int)
			}
			in.topics[h]++
		}
	}
	for _, t := range c.Remove {
		if h, ok := il.topics[t]; ok {
			delete(il.topics, t)
			in.lose(h)
		}
	}
	s.grewLocked()
}

func (in *interest) lose(h string) {
	if in.topics[h]--; in.topics[h] <= 0 {
		delete(in.topics, h)
	}
}

// grewLocked checks whether the consumer reads everything the listeners
// need now; if not, it stops the delivery of events until the feed has
// created its consumer again, reading everything. The caller holds
// s.imu.
func (s *Store) grewLocked() {
	in := &s.interest
	if in.current == nil || in.changed && in.wide {
		return // it reads everything, or will
	}
	if want := s.filterLocked(); want != nil && subset(want, in.current) {
		return
	}
	in.grown = time.Now()
	in.wide = true
	in.changed = true
	if in.iter != nil {
		in.iter.Stop() // the feed's Next returns at once
		in.iter = nil
	}
}

// narrow tells whether the feed is to create its consumer again with a
// narrower filter: the consumer reads more than needed, and the interest
// has not grown for narrowAfter. If so, it stops the delivery of events.
func (s *Store) narrow() bool {
	s.imu.Lock()
	defer s.imu.Unlock()
	in := &s.interest
	if in.changed || time.Since(in.grown) < narrowAfter || sameFilter(in.current, s.filterLocked()) {
		return false
	}
	in.changed = true
	in.iter = nil
	return true
}

// filterLocked is the subjects the feed's consumer reads: nil for every
// one. The caller holds s.imu.
func (s *Store) filterLocked() []string {
	in := &s.interest
	if in.all > 0 || in.listeners == 0 || len(in.topics) >= maxFilters {
		return nil
	}
	f := make([]string, 0, len(in.topics)+1)
	f = append(f, s.name+".*.m")
	size := len(f[0])
	for h := range in.topics {
		sub := s.name + ".*." + h
		if size += len(sub) + 3; size > maxFilterBytes {
			return nil
		}
		f = append(f, sub)
	}
	return f
}

// sameFilter tells whether two filters read the same subjects.
func sameFilter(a, b []string) bool {
	return (a == nil) == (b == nil) && len(a) == len(b) && (a == nil || subset(a, b))
}

// subset tells whether every subject of the filter a is one of b's
// (neither nil).
func subset(a, b []string) bool {
	set := make(map[string]struct{}, len(b))
	for _, x := range b {
		set[x] = struct{}{}
	}
	for _, x := range a {
		if _, ok := set[x]; !ok {
			return false
		}
	}
	return true
}

// nextFilter returns the filter of the consumer to create, and clears
// the change: everything after the interest grew, the listeners' filter
// otherwise.
func (s *Store) nextFilter() []string {
	s.imu.Lock()
	defer s.imu.Unlock()
	in := &s.interest
	in.changed = false
	in.current = s.filterLocked()
	if in.wide {
		in.current, in.wide = nil, false
	}
	return in.current
}

// started records the iterator of the consumer just created after pos,
// which a change of interest stops, and checks the stream's first
// message, first, read since, against through: the messages the
// consumers skipped before pos had been dropped before, so past that
// check every message up to pos that the filter passes was delivered or
// is covered by a gap. It returns false when a change came meanwhile.
func (s *Store) started(it jetstream.MessagesContext, pos position, first uint64) bool {
	s.imu.Lock()
	defer s.imu.Unlock()
	if s.interest.changed {
		return false
	}
	s.checkDropped(first)
	s.interest.through = max(s.interest.through, pos.seq)
	s.interest.iter = it
	s.interest.running = s.interest.current
	return true
}

// checkDropped tells the listeners of a gap when the stream's first
// message is first, past through+1: retention dropped messages that the
// filter may have passed before the feed read them. through then covers
// them.
func (s *Store) checkDropped(first uint64) {
	in := &s.interest
	if first > in.through+1 {
		s.listeners.Gap()
		in.through = first - 1
	}
}

// scanned is a filtered consumer's progress, read from its info: the
// stream sequence it had scanned to and the messages it had sent.
type scanned struct {
	seq, sent uint64
	ok        bool
	// delivered is what the feed had passed on at the check, pending
	// what the consumer had left to send of its filter's.
	delivered, pending uint64
}

// checkFiltered is the periodic check of a filtered feed (see above):
// with the stream's first message, read now, it reports a gap, and
// confirms the consumer's progress read at the previous check, prev, if
// the feed has passed on what the consumer had sent (delivered is the
// consumer sequence of the last message it passed); then it reads the
// consumer's progress again, for the next check.
func (s *Store) checkFiltered(cons jetstream.Consumer, prev scanned, delivered uint64) (scanned, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	st, err := s.info(ctx)
	if err != nil {
		return prev, err
	}
	s.imu.Lock()
	if !s.interest.changed { // else a new consumer starts over
		s.checkDropped(st.FirstSeq)
		if prev.ok && delivered >= prev.sent {
			s.interest.through = max(s.interest.through, prev.seq)
			prev.ok = false
		}
	}
	s.imu.Unlock()
	ci, err := cons.Info(ctx)
	if err != nil {
		return prev, err
	}
	return scanned{seq: ci.Delivered.Stream, sent: ci.Delivered.Consumer, ok: true, delivered: delivered, pending: ci.NumPending}, nil
}
