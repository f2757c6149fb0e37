package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/store"
)

// Listen implements [store.Store]. l's functions are called from the
// store's feed goroutine: l.Event one event at a time in Seq order,
// l.Status when the feed loses the servers and when it is back. Events
// this Store appended before Listen was called are not passed to
// l.Event. A listener added during an outage is told at once.
func (s *Store) Listen(l store.Listener) (cancel func()) {
	return s.listeners.Add(l)
}

// errDisconnected reports a connection that is not connected.
var errDisconnected = errors.New("natsstore: not connected to a NATS server")

// position is where the feed is: the last message it passed on, and
// that message's update id and time, to tell it from another message
// with the same sequence in a history that lost it.
type position struct {
	seq  uint64
	id   string
	time time.Time
}

// readLoop feeds the listeners from the stream, after the message last
// (with event e, nil if none). It reads through a consumer of its own,
// which it creates again after the last message it passed whenever it
// fails (the servers lost it, or the connection), with backoff. After a
// failure, and every second, it checks that the stream still holds the
// last message it passed on (see verify).
func (s *Store) readLoop(last uint64, e *store.Event) {
	defer s.wg.Done()
	pos := position{seq: last}
	if e != nil {
		pos.id, pos.time = e.ID, e.Time
	}
	backoff := minBackoff
	verify := false
	for !s.closed() {
		var err error
		if verify {
			if pos, err = s.verify(pos); err == nil {
				verify = false
			}
		}
		if err == nil {
			pos, err = s.consume(pos)
		}
		if s.closed() {
			return
		}
		if err != nil {
			verify = true
			s.presence.lost()
			s.listeners.Status(err)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
	}
}

// consume reads the stream after pos through a new consumer, until it
// fails, the store closes, or the history must be checked (then err is
// nil), and returns the last message it passed on.
func (s *Store) consume(pos position) (position, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	cfg := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       pos.seq + 1,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: max(10*time.Second, 2*s.cfg.timeout),
		FilterSubjects:    s.filter(),
	}
	cons, err := s.js.CreateConsumer(ctx, s.name, cfg)
	if err != nil {
		return pos, err
	}
	name := cons.CachedInfo().Name
	defer func() {
		// Best effort: the server drops it after InactiveThreshold.
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout)
		defer cancel()
		_ = s.js.DeleteConsumer(ctx, s.name, name)
	}()
	it, err := cons.Messages(jetstream.PullMaxMessages(readCount), jetstream.PullHeartbeat(heartbeat),
		jetstream.PullExpiry(max(5*time.Second, 3*heartbeat)), jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		return pos, err
	}
	defer it.Stop()
	s.listeners.Status(nil)
	s.presence.reconnected()
	var delivered uint64 // the consumer's sequence of the last message
	checked := time.Now()
	// heard is when the consumer last delivered a message, or was found
	// with none to deliver; owed is the stream's last message when the
	// feed, idle, last asked, which the consumer owes by the next check.
	heard, owed := checked, uint64(0)
	for !s.closed() {
		if time.Since(checked) >= checkEvery {
			// A replaced history (a restarted server, a stream created
			// again) may have the consumer deliver its messages after a
			// sequence that the feed passed in the old one.
			next, err := s.verify(pos)
			if err != nil {
				return pos, err
			}
			checked = time.Now()
			if next != pos {
				return next, nil // rewound: a new consumer from there
			}
			// A consumer whose server died, while the connection (to
			// another server) stays up, delivers nothing, and its
			// missing heartbeats go unnoticed: the iterator takes the
			// no-responders answers to its pull requests for signs of
			// life.
			if checked.Sub(heard) >= 2*heartbeat {
				if owed > pos.seq {
					return pos, fmt.Errorf("natsstore: the feed's consumer delivered none of messages %d to %d in %v", pos.seq+1, owed, checkEvery)
				}
				if owed, err = s.lastSeq(); err != nil {
					return pos, err
				}
				if owed <= pos.seq {
					heard = checked
				}
			}
		}
		msg, err := it.Next(jetstream.NextMaxWait(block))
		if errors.Is(err, nats.ErrTimeout) {
			if s.nc.Status() != nats.CONNECTED {
				return pos, errDisconnected
			}
			s.listeners.Status(nil)
			continue
		}
		if err != nil {
			return pos, err
		}
		heard, owed = time.Now(), 0
		meta, err := msg.Metadata()
		if err != nil {
			continue // not a message of the stream
		}
		if delivered != 0 && meta.Sequence.Consumer != delivered+1 {
			// The connection dropped a message: read again after pos.
			return pos, nil
		}
		delivered = meta.Sequence.Consumer
		seq := meta.Sequence.Stream
		if seq <= pos.seq {
			continue // cannot be: the consumer starts after pos
		}
		if seq != pos.seq+1 && s.filter() == nil {
			// Retention dropped the messages between before the feed
			// could read them.
			s.listeners.Gap()
		}
		e, err := decode(seq, msg.Data())
		pos.seq = seq
		if err != nil {
			// A message written by something else than a Store: skip
			// it rather than stall the feed.
			pos.id, pos.time = "", time.Time{}
			continue
		}
		pos.id, pos.time = e.ID, e.Time
		s.latest.Seen(e.Seq, e.ID)
		s.passed.Add(e.Seq, e.ID, e.Time)
		s.listeners.Deliver(e)
	}
	return pos, nil
}

// lastSeq returns the sequence of the stream's last message.
func (s *Store) lastSeq() (uint64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	st, err := s.info(ctx)
	return st.LastSeq, err
}

// staleState is how long the stream's state must end before the last
// message the feed passed on for verify to take that message for lost.
const staleState = 3 * time.Second

// filter is the subjects the feed reads: nil for every one.
func (s *Store) filter() []string { return nil }

// verify checks that the stream still holds pos, the last message the
// feed passed on, and returns where the feed goes on from: pos again or,
// when the history lost it (a server that restarted without its data, a
// stream deleted and created again), the last message before it that
// the stream holds and the feed passed on, after telling the listeners
// that the history was rewound to it (see [store.Listener]). Retention
// only drops messages before the first one: a message before the first,
// in a stream that goes on past it, was dropped, not lost.
func (s *Store) verify(pos position) (position, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	st, err := s.info(ctx)
	if err != nil {
		return pos, err
	}
	if pos.seq == 0 {
		return pos, nil
	}
	// The leader's state may lag, by seconds on a loaded machine, behind
	// a message that a consumer on another replica has already
	// delivered: a history that ends before pos is taken for one that
	// lost pos only once it has for staleState.
	if st.LastSeq < pos.seq {
		if s.shorter.IsZero() {
			s.shorter = time.Now()
		}
		if time.Since(s.shorter) < staleState {
			return pos, nil
		}
	}
	s.shorter = time.Time{}
	if st.LastSeq >= pos.seq {
		if pos.seq < st.FirstSeq || pos.id == "" {
			return pos, nil // dropped by retention, or not a Store's
		}
		e, err := s.eventAt(ctx, pos.seq)
		if err != nil {
			return pos, err
		}
		if e == nil || (e.ID == pos.id && e.Time.Equal(pos.time)) {
			return pos, nil // deleted by an operator, or still there
		}
	}
	// The history lost pos: find the last message it shares with the
	// events passed on, newest first.
	head := position{}
	for _, p := range s.passed.After(0) {
		if p.Seq > st.LastSeq || p.Seq < st.FirstSeq {
			continue
		}
		e, err := s.eventAt(ctx, p.Seq)
		if err != nil {
			return pos, err
		}
		if e != nil && e.ID == p.ID && e.Time.Equal(p.Time) {
			head = position{seq: p.Seq, id: p.ID, time: p.Time}
			break
		}
	}
	if head.seq == 0 && st.LastSeq > 0 && !s.passedAny(st.LastSeq) {
		// The feed passed nothing the new history could share: it may
		// share everything up to its last message.
		e, err := s.eventAt(ctx, st.LastSeq)
		if err != nil {
			return pos, err
		}
		head.seq = st.LastSeq
		if e != nil {
			head.id, head.time = e.ID, e.Time
		}
	}
	id := head.id
	if head.seq == 0 {
		id = store.Earliest // as store.Listener says of an empty history
	}
	s.passed.Forget(head.seq)
	s.latest.Rewind(head.seq, id)
	s.listeners.Rewind(head.seq, id)
	return head, nil
}

// passedAny tells whether the feed passed on, among the events it
// remembers, one with a Seq not after seq.
func (s *Store) passedAny(seq uint64) bool {
	all := s.passed.After(0)
	return len(all) > 0 && all[len(all)-1].Seq <= seq
}
