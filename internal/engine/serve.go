package engine

import (
	"net/http"
	"time"
)

// run is the goroutine writer: the handler's goroutine writes the
// stream through net/http's ResponseWriter until the client leaves, the
// stream ends or the engine stops. It serves what cannot be detached:
// HTTP/2 streams, writers that cannot be hijacked, and every stream when
// detaching is off.
func (s *Stream) run(r *http.Request) {
	e := s.e
	gone := r.Context().Done()
	for {
		select {
		case <-s.wakeCh:
		case <-gone:
			return // close settles the reason: the client left
		case <-e.ctx.Done(): // step ends the stream
		}
		now := time.Now()
		p := s.step(now)
		if p.abort {
			return
		}
		if !s.writePlan(p) {
			return
		}
		s.done(p, true, time.Now())
		if p.end {
			return // net/http ends the response cleanly
		}
	}
}

// writePlan writes p through the ResponseWriter and flushes, reporting
// false when a write failed.
func (s *Stream) writePlan(p plan) bool {
	wrote := false
	for _, ev := range p.events {
		if ev.Seq <= s.minSeq {
			continue // already sent by the replay
		}
		if s.write(ev.Bytes) != nil {
			return false
		}
		wrote = true
	}
	for _, b := range [][]byte{commentIf(p.comment), p.farewell} {
		if b != nil {
			if s.write(b) != nil {
				return false
			}
			wrote = true
		}
	}
	return !wrote || s.rc.Flush() == nil
}

// commentIf returns the keep-alive comment when c, else nil.
func commentIf(c bool) []byte {
	if c {
		return keepAliveComment
	}
	return nil
}
