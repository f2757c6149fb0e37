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
// A change of interest stops the delivery of events at once, then
// creates the consumer again, with the new filter, after the last event
// the feed passed on: it reads again the events of the new topics that
// it left out since, so that a stream registered on a new topic after
// the change was made misses none of those after the hub's position.
// Creations are spaced restartEvery apart, so that a burst of new
// topics costs a few.
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
	// 1 MiB by default), the consumer reads everything.
	maxFilters     = 4096
	maxFilterBytes = 256 << 10
	// restartEvery spaces the creations of the feed's consumer that
	// changes of interest cause.
	restartEvery = 50 * time.Millisecond
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
	// created is when the feed last created its consumer.
	created time.Time
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
	s.changedLocked() // a listener that needs everything, or the first
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
	if in.all == 0 {
		s.changedLocked()
	}
}

// want applies a listener's change of interest.
func (s *Store) want(il *interestListener, c store.Interest) {
	s.imu.Lock()
	defer s.imu.Unlock()
	if il.gone {
		return
	}
	in := &s.interest
	before := s.filterLocked()
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
	if !sameFilter(before, s.filterLocked()) {
		s.changedLocked()
	}
}

func (in *interest) lose(h string) {
	if in.topics[h]--; in.topics[h] <= 0 {
		delete(in.topics, h)
	}
}

// changedLocked stops the delivery of events until the feed has created
// its consumer again with the filter of now. The caller holds s.imu.
func (s *Store) changedLocked() {
	in := &s.interest
	in.changed = true
	if in.iter != nil {
		in.iter.Stop() // the feed's Next returns at once
		in.iter = nil
	}
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
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	set := make(map[string]struct{}, len(a))
	for _, x := range a {
		set[x] = struct{}{}
	}
	for _, x := range b {
		if _, ok := set[x]; !ok {
			return false
		}
	}
	return true
}

// nextFilter waits, after a change of interest, until restartEvery has
// passed since the consumer was last created (so that a burst of changes
// costs a few creations), then returns the filter of the consumer to
// create and clears the change; false when the store closed meanwhile.
func (s *Store) nextFilter() ([]string, bool) {
	s.imu.Lock()
	wait := time.Duration(0)
	if s.interest.changed {
		wait = time.Until(s.interest.created.Add(restartEvery))
	}
	s.imu.Unlock()
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-s.ctx.Done():
			return nil, false
		}
	}
	s.imu.Lock()
	defer s.imu.Unlock()
	s.interest.changed = false
	s.interest.created = time.Now()
	return s.filterLocked(), true
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
}

// checkFiltered is the periodic check of a filtered feed (see above):
// with the stream's first message, read now, it reports a gap, and
// confirms the consumer's progress read at the previous check, prev, if
// the feed has passed on what the consumer had sent (delivered is the
// consumer sequence of the last message it passed); then it reads the
// consumer's progress again, for the next check.
func (s *Store) checkFiltered(ctx context.Context, cons jetstream.Consumer, prev scanned, delivered uint64) (scanned, error) {
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
	return scanned{seq: ci.Delivered.Stream, sent: ci.Delivered.Consumer, ok: true}, nil
}
