package engine

import "time"

// The two writers, a goroutine per stream (serve.go) and the pool that
// runs detached streams (conn.go), differ only in how they write: both
// ask step what to write next, and both report what they wrote with
// done. Queues and batching, keep-alives, expiry, the write delay, a
// stream's ending and its farewell (a drain, a revoked session, a feed
// gap, a shutdown) live here once.

// plan is what a stream's writer does next.
type plan struct {
	// events are the events taken from the queue, in order; those the
	// replay covered (Seq ≤ minSeq) are not to be written.
	events   []*Event
	comment  bool   // a keep-alive comment
	farewell []byte // written after the events
	end      bool   // end the response cleanly once these are written
	abort    bool   // end now: write nothing
	// more is whether events are left in the queue, past the queue's
	// worth that the writer takes at a time: it runs again for them.
	more bool
}

// step decides what s's writer does now, from the stream's state and
// the flags it was woken with.
func (s *Stream) step(now time.Time) (p plan) {
	e := s.e
	s.mu.Lock()
	flags := s.flags
	s.flags = 0
	if flags&flagGone != 0 {
		s.abortLocked(EndClientGone)
	}
	switch s.state {
	case stateAborted, stateFinished:
		s.mu.Unlock()
		return plan{abort: true}
	case stateOpen:
		// A clean end: the client resumes with Last-Event-ID.
		switch {
		case e.stopped():
			s.state, s.why = stateEnding, EndShutdown
		case flags&flagExpired != 0:
			s.state, s.why = stateEnding, s.expiryWhy
		}
	}
	ending := s.state == stateEnding
	keepAlive := flags&flagKeepAlive != 0 && now.UnixNano()-s.lastWrite.Load() >= int64(e.cfg.KeepAlive)
	if flags&flagDelayOver != 0 {
		s.delayArmed = false
	}
	if delay := e.cfg.WriteDelay; delay > 0 && !ending && !keepAlive && flags&flagUrgent == 0 {
		if s.delayArmed {
			s.mu.Unlock()
			return plan{} // the events go out when the delay ends
		}
		var last time.Time
		if s.timers != nil {
			last = s.timers.lastEvents
		}
		if wait := last.Add(delay).Sub(now); wait > 0 && len(s.queue) > 0 {
			s.delayArmed = true
			s.mu.Unlock()
			s.armDelay(wait)
			return plan{}
		}
	}
	if take, size := s.worth(); take < len(s.queue) {
		// Past its bound (see enqueue): a queue's worth at a time, so
		// that what the writer hands the connection is bounded (see
		// behindLocked), and the writers take turns among the streams.
		// The rest stays queued, in the same array past the events taken:
		// they never share a slot.
		p.events, p.more = s.queue[:take:take], true
		s.queue = s.queue[take:]
		s.inflight, s.inflightBytes = p.events, size
		s.queueBytes -= size
		s.flags |= flagUrgent // the rest goes without a write delay
	} else {
		spare := s.spare
		if cap(spare) > 64 && len(spare) < cap(spare)/8 {
			spare = nil // a burst is over: give its memory back
		}
		p.events = s.queue
		s.queue, s.spare = spare[:0], nil
		s.inflight, s.inflightBytes = p.events, s.queueBytes
		s.queueBytes = 0
	}
	if ending && !p.more {
		p.farewell, p.end = s.farewell, true
	}
	if len(p.events) > 0 || keepAlive || ending {
		s.sending = now.UnixNano() // until written (see behindLocked)
	}
	s.mu.Unlock()
	// Events keep the stream alive as well.
	p.comment = keepAlive && p.farewell == nil && !s.writes(p.events)
	return p
}

// worth returns how many of the queue's first events make a queue's
// worth (Limits.QueueEvents and QueueBytes, at least one event), and
// their size. The caller holds s.mu.
func (s *Stream) worth() (n, size int) {
	lim := &s.e.cfg.Limits
	if len(s.queue) <= lim.QueueEvents && s.queueBytes <= lim.QueueBytes {
		return len(s.queue), s.queueBytes
	}
	for n < len(s.queue) && n < lim.QueueEvents {
		b := len(s.queue[n].Bytes)
		if n > 0 && size+b > lim.QueueBytes {
			break
		}
		n, size = n+1, size+b
	}
	return n, size
}

// writes reports whether one of events is to be written: not covered by
// the replay.
func (s *Stream) writes(events []*Event) bool {
	for _, ev := range events {
		if ev.Seq > s.minSeq {
			return true
		}
	}
	return false
}

// done records what the writer wrote of p: every event of it, when all
// is true; then the events no longer count against the limits, and p's
// slice is kept for the next step.
func (s *Stream) done(p plan, all bool, now time.Time) {
	if !all {
		return // close counts them out
	}
	wrote := false
	for _, ev := range p.events {
		if ev.Seq > s.minSeq {
			s.sampleDelay(ev)
			wrote = true
		}
	}
	s.written()
	if wrote || p.comment || p.farewell != nil {
		s.lastWrite.Store(now.UnixNano())
	}
	if wrote && s.e.cfg.WriteDelay > 0 {
		s.timersFor().lastEvents = now
	}
	clear(p.events) // an idle stream pins no event
	s.spare = p.events[:0]
	if p.more {
		s.wake() // for the rest of the queue
	}
}

// armDelay arms the write delay's timer to fire after wait.
func (s *Stream) armDelay(wait time.Duration) {
	t := s.timersFor()
	if t.delay == nil {
		t.delay = time.AfterFunc(wait, func() { s.signal(flagDelayOver) })
		return
	}
	t.delay.Reset(wait)
}
