package engine

import "time"

// Keep-alives come from one sweep per engine rather than a timer per
// stream: every eighth of the keep-alive interval, it wakes the streams
// that wrote nothing for the interval, which then write a comment. A
// stream's comment is due after the interval and at most an eighth of
// it more; an idle stream costs no timer. The sweep runs while the engine
// has streams. It walks the registry one shard at a time (see registry):
// no lock is held over all the streams, so that, with a million of them,
// a stream opening or ending never waits for the whole walk (a single
// lock held for it stalled them for 100 to 400 ms at every sweep).

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
		e.life.Lock()
		if e.counts.total == 0 {
			e.sweeping = false
			e.life.Unlock()
			return
		}
		e.life.Unlock()
		due = e.due(time.Now().UnixNano(), int64(interval), due[:0])
		for i, s := range due {
			s.signal(flagKeepAlive)
			due[i] = nil
		}
		if cap(due) > 4096 && len(due) < cap(due)/8 {
			due = nil
		}
	}
}

// due appends to dst the streams that wrote nothing since interval
// before now (unix nanoseconds), walking the registry shard by shard.
func (e *Engine) due(now, interval int64, dst []*Stream) []*Stream {
	e.streams.each(func(streams []*Stream) {
		for _, s := range streams {
			if now-s.lastWrite.Load() >= interval {
				dst = append(dst, s)
			}
		}
	})
	return dst
}
