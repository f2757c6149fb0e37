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

// errStalled reports a consumer that stopped delivering what the stream
// holds.
var errStalled = errors.New("natsstore: the feed's consumer stopped delivering")

// errDisconnected reports a connection that is not connected, or
// reconnected under the feed.
var errDisconnected = errors.New("natsstore: the connection to the NATS servers was lost")

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
			if pos, _, err = s.verify(pos); err == nil {
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
	filter := s.nextFilter()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	cfg := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       pos.seq + 1,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: max(10*time.Second, 2*s.cfg.timeout),
		FilterSubjects:    filter,
	}
	// A reconnect after this may be to servers that lost the consumer
	// (restarted, without their data even), and loses the messages on
	// the way: the feed goes on through a new consumer, after checking
	// the history, even when the reconnect took less than a block.
	reconnects := s.nc.Stats().Reconnects
	cons, err := s.js.CreateConsumer(ctx, s.name, cfg)
	if err != nil {
		return pos, err
	}
	name := cons.CachedInfo().Name
	defer func() {
		// Best effort, and without waiting for the answer: the server
		// drops the consumer after InactiveThreshold anyway, and a
		// request waited for would hold the feed, and its report of an
		// outage, for the whole timeout when the connection is down (a
		// delete sent meanwhile goes on reconnecting).
		_ = s.nc.Publish("$JS.API.CONSUMER.DELETE."+s.name+"."+name, nil)
	}()
	// No pull heartbeats: jetstream's iterator watches them within one
	// call of Next, shorter here (block) than two of them. The check
	// every second tells a server that stopped answering, and a
	// consumer that stopped delivering.
	it, err := cons.Messages(jetstream.PullMaxMessages(readCount))
	if err != nil {
		return pos, err
	}
	defer it.Stop()
	// Retention may have dropped, before this consumer reads them,
	// messages after pos that a filter passes: it would skip them
	// silently (see interest.go).
	st, err := s.info(ctx)
	if err != nil {
		return pos, err
	}
	if !s.started(it, pos, st.FirstSeq) {
		return pos, nil // the interest changed meanwhile
	}
	s.listeners.Status(nil)
	s.presence.reconnected()
	var delivered uint64 // the consumer's sequence of the last message
	var progress scanned // a filtered consumer's, at the last check
	checked := time.Now()
	// behind is whether the stream held events after the position at
	// the last check, behindAt that position.
	var behind bool
	var behindAt uint64
	for !s.closed() {
		if time.Since(checked) >= checkEvery {
			// A replaced history (a restarted server, a stream created
			// again) may have the consumer deliver its messages after a
			// sequence that the feed passed in the old one.
			next, st, err := s.verify(pos)
			if err != nil {
				return pos, err
			}
			checked = time.Now()
			if next != pos {
				return next, nil // rewound: a new consumer from there
			}
			if filter == nil {
				if behind && behindAt == pos.seq {
					// A whole check period without a message, while the
					// stream held more: the consumer stopped delivering
					// (its server lost while the connection, to another,
					// stays up; its pull requests lost; paused by an
					// operator) without a word. The feed failed: it says
					// so, and a new consumer takes over.
					return pos, fmt.Errorf("%w: none of the messages after %d in %v", errStalled, pos.seq, checkEvery)
				}
				behind, behindAt = st.Msgs > 0 && st.LastSeq > pos.seq, pos.seq
			} else {
				prev := progress
				if progress, err = s.checkFiltered(cons, progress, delivered); err != nil {
					return pos, err
				}
				if prev.ok && prev.pending > 0 && delivered == prev.delivered {
					// The same for a filtered consumer: it had events of
					// the filter to send a check ago, and sent none since.
					return pos, fmt.Errorf("%w: none of the %d messages of its filter pending after %d in %v", errStalled, prev.pending, pos.seq, checkEvery)
				}
			}
			if s.narrow() {
				return pos, nil // a new consumer, with the narrower filter
			}
		}
		msg, err := it.Next(jetstream.NextMaxWait(block))
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) && s.interestChanged() {
			return pos, nil // a new consumer, with the new filter
		}
		if errors.Is(err, nats.ErrTimeout) {
			if s.nc.Status() != nats.CONNECTED || s.nc.Stats().Reconnects != reconnects {
				return pos, errDisconnected
			}
			continue
		}
		if err != nil {
			return pos, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue // not a message of the stream
		}
		if meta.Sequence.Consumer != delivered+1 {
			// The connection dropped a message, maybe the consumer's
			// first (a new consumer delivers from 1): read again after
			// pos, rather than take the next for a gap in the stream.
			return pos, nil
		}
		s.read.Add(1)
		s.imu.Lock()
		if s.interest.changed {
			s.imu.Unlock()
			return pos, nil // a new consumer, with the new filter, after pos
		}
		delivered = meta.Sequence.Consumer
		seq := meta.Sequence.Stream
		if seq <= pos.seq {
			s.imu.Unlock()
			continue // cannot be: the consumer starts after pos
		}
		if filter == nil {
			if seq > s.interest.through+1 {
				// Retention dropped the messages between before the
				// feed could read them.
				s.listeners.Gap()
			}
			s.interest.through = seq
		}
		e, err := decode(seq, msg.Data())
		pos.seq = seq
		if err != nil {
			// A message written by something else than a Store: skip
			// it rather than stall the feed.
			pos.id, pos.time = "", time.Time{}
			s.imu.Unlock()
			continue
		}
		pos.id, pos.time = e.ID, e.Time
		s.latest.Seen(e.Seq, e.ID)
		s.passed.Add(e.Seq, e.ID, e.Time)
		s.listeners.Deliver(e)
		s.imu.Unlock()
	}
	return pos, nil
}

// interestChanged tells whether the consumer's filter is out of date.
func (s *Store) interestChanged() bool {
	s.imu.Lock()
	defer s.imu.Unlock()
	return s.interest.changed
}

// staleState is how long the stream's state must end before the last
// message the feed passed on for verify to take that message for lost.
const staleState = 3 * time.Second

// verify checks that the stream still holds pos, the last message the
// feed passed on, and returns where the feed goes on from: pos again or,
// when the history lost it (a server that restarted without its data, a
// stream deleted and created again), the last message before it that
// the stream holds and the feed passed on, after telling the listeners
// that the history was rewound to it (see [store.Listener]). Retention
// only drops messages before the first one: a message before the first,
// in a stream that goes on past it, was dropped, not lost. It returns
// the stream's state too.
func (s *Store) verify(pos position) (_ position, st streamState, err error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	st, err = s.info(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// The servers lost the stream with their data, or it was
		// deleted: it is made again, as New made it, empty.
		if err = s.createStream(ctx); err == nil {
			st, err = s.info(ctx)
		}
	}
	if err != nil {
		return pos, st, err
	}
	if pos.seq == 0 {
		return pos, st, nil
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
			return pos, st, nil
		}
	}
	s.shorter = time.Time{}
	if st.LastSeq >= pos.seq {
		if pos.seq < st.FirstSeq || pos.id == "" {
			return pos, st, nil // dropped by retention, or not a Store's
		}
		e, err := s.eventAt(ctx, pos.seq)
		if err != nil {
			return pos, st, err
		}
		if e == nil || (e.ID == pos.id && e.Time.Equal(pos.time)) {
			return pos, st, nil // deleted by an operator, or still there
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
			return pos, st, err
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
			return pos, st, err
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
	// The ids of the events that vanished are unknown cursors from now
	// on, before any stream ends for the rewind (see bury).
	if err := s.bury(ctx, s.passed.After(head.seq)); err != nil {
		return pos, st, err
	}
	s.passed.Forget(head.seq)
	s.imu.Lock()
	s.interest.through = head.seq // a new history from there
	s.imu.Unlock()
	s.latest.Rewind(head.seq, id)
	s.listeners.Rewind(head.seq, id)
	return head, st, nil
}

// passedAny tells whether the feed passed on, among the events it
// remembers, one with a Seq not after seq.
func (s *Store) passedAny(seq uint64) bool {
	all := s.passed.After(0)
	return len(all) > 0 && all[len(all)-1].Seq <= seq
}
