package engine

import (
	"errors"
	"net/http"
	"os"
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
		case <-s.h.wakeCh:
		case <-gone:
			return // close settles the reason: the client left
		case <-e.ctx.Done(): // step ends the stream
		}
		now := time.Now()
		p := s.step(now)
		if p.abort {
			return
		}
		if err := s.writePlan(p); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The write timeout: the client took nothing for that
				// long, whatever net/http makes of the connection next.
				s.setEnd(EndWriteError)
			}
			return
		}
		s.done(p, true, time.Now())
		if p.end {
			return // net/http ends the response cleanly
		}
	}
}

// writePlan writes p through the ResponseWriter and flushes.
func (s *Stream) writePlan(p plan) error {
	wrote := false
	for _, ev := range p.events {
		if ev.Seq <= s.minSeq {
			continue // already sent by the replay
		}
		if err := s.write(ev.Bytes); err != nil {
			return err
		}
		wrote = true
	}
	for _, b := range [][]byte{commentIf(p.comment), p.farewell} {
		if b != nil {
			if err := s.write(b); err != nil {
				return err
			}
			wrote = true
		}
	}
	if !wrote {
		return nil
	}
	return s.flush()
}

// commentIf returns the keep-alive comment when c, else nil.
func commentIf(c bool) []byte {
	if c {
		return keepAliveComment
	}
	return nil
}
