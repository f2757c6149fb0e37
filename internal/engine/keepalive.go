package engine

import "time"

// Keep-alives come from one sweep per engine rather than a timer per
// stream: every eighth of the keep-alive interval, it wakes the streams
// that wrote nothing for the interval, which then write a comment. A
// stream's comment is due after the interval and at most an eighth of
// it more; an idle stream costs no timer. The sweep runs while the engine
// has streams.

// sweepLocked starts the sweep if it is not running. The caller holds
// e.life.
func (e *Engine) sweepLocked() {
	if e.sweeping || e.closed {
		return
	}
	e.sweeping = true
	e.sweeps.Add(1)
	go e.sweep()
}

func (e *Engine) sweep() {
	defer e.sweeps.Done()
	interval := e.cfg.KeepAlive
	t := time.NewTicker(max(interval/8, time.Millisecond))
	defer t.Stop()
	var due []*Stream
	for {
		select {
		case <-t.C:
		case <-e.ctx.Done():
			return
		}
		now := time.Now().UnixNano()
		e.life.Lock()
		if len(e.streams) == 0 {
			e.sweeping = false
			e.life.Unlock()
			return
		}
		for s := range e.streams {
			if now-s.lastWrite.Load() >= int64(interval) {
				due = append(due, s)
			}
		}
		e.life.Unlock()
		for i, s := range due {
			s.signal(flagKeepAlive)
			due[i] = nil
		}
		if cap(due) > 4096 && len(due) < cap(due)/8 {
			due = nil
		}
		due = due[:0]
	}
}
