package engine

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"
)

// RetryField is the SSE field that sets the reconnection delay a drained
// stream is told: a second, ± half a second of jitter.
func RetryField() []byte { return RetryFieldAfter(time.Second) }

// RetryFieldAfter is the SSE field that sets the reconnection delay to
// about d: d ± d/2, so that clients told together come back spread out.
// It is a millisecond at least. A client applies a retry field as it
// reads it; no empty line follows, which would end a block that some
// parsers report as a message with empty data (see sse.KeepAlive).
func RetryFieldAfter(d time.Duration) []byte {
	ms := max(int64(d/time.Millisecond), 1)
	ms = ms - ms/2 + rand.Int64N(ms)
	return append(strconv.AppendInt([]byte("retry: "), ms, 10), '\n')
}

// drainStep is how often the drain ends the streams that are due.
const drainStep = 10 * time.Millisecond

// Drain ends the open streams in a random order, spread evenly over
// window (shortened to what ctx allows), each with a [RetryField] and a
// clean end, and returns when the last one has been told to end and the
// streams have written their farewell (for a grace period at most), or
// ctx is done. It returns as soon as nothing is left to drain: every
// stream gone (their clients left), or the engine stopped (a second
// Shutdown skipped the drain).
func (e *Engine) Drain(ctx context.Context, window time.Duration) {
	if dl, ok := ctx.Deadline(); ok {
		// Leave time for the rest of a shutdown: the streams' ends, the grace.
		window = min(window, time.Until(dl)-shutdownGrace-time.Second)
	}
	streams := e.snapshot()
	defer e.waitDrained(ctx)
	rand.Shuffle(len(streams), func(i, j int) { streams[i], streams[j] = streams[j], streams[i] })
	start := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for done := 0; done < len(streams); {
		// Streams due by now: those whose slot i·window/n has come.
		due := len(streams)
		if elapsed := time.Since(start); window > 0 && elapsed < window {
			due = min(len(streams), int(int64(len(streams))*int64(elapsed)/int64(window))+1)
		}
		for ; done < due; done++ {
			streams[done].End(EndShutdown, RetryField())
			streams[done] = nil
		}
		if done == len(streams) || e.Streams() == 0 {
			break
		}
		t.Reset(drainStep)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-e.ctx.Done():
			return // stopped: Stop ends the streams left
		}
	}
}

// waitDrained waits, for shutdownGrace at most, until the drained streams
// have written their farewell and ended: a shutdown then ends the others
// (those stuck on a peer) without cutting a farewell short.
func (e *Engine) waitDrained(ctx context.Context) {
	deadline := time.Now().Add(shutdownGrace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if e.Streams() == 0 {
			return
		}
		time.Sleep(drainStep)
	}
}
