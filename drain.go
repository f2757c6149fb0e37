package mercure

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// WithDrain makes [Hub.Shutdown] end the open streams gradually over d
// rather than all at once: each stream, at its turn, gets a retry field
// of about a second (with jitter) and a clean end, so that its client
// reconnects (to another instance, in a rolling deploy) soon, and the
// reconnections spread over d instead of arriving in the same second.
// Meanwhile the hub publishes and delivers as usual; a subscribe request
// gets a stream that holds only such a retry and ends at once, since an
// EventSource gives up for good on any status but 200; [Hub.Live] and
// [Hub.Ready] report [ErrShuttingDown], so that load balancers stop
// sending clients. When Shutdown's context allows less than d, the drain
// is compressed to fit. 0, the default, ends every stream at once.
func WithDrain(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: WithDrain(%v) is negative", ErrInvalidOption, d)
		}
		c.drain = d
		return nil
	}
}

// drainField is the SSE event that sets the reconnection delay a drained
// stream is told: a second, ± half a second of jitter.
func drainField() []byte {
	ms := 500 + rand.IntN(1000)
	return append(strconv.AppendInt([]byte("retry: "), int64(ms), 10), "\n\n"...)
}

// drainStep is how often the drain ends the streams that are due.
const drainStep = 10 * time.Millisecond

// drainStreams ends the open streams in a random order, spread evenly
// over the drain window (shortened to what ctx allows), and returns
// when the last one has been told to end, or ctx is done.
func (h *Hub) drainStreams(ctx context.Context) {
	window := h.cfg.drain
	if dl, ok := ctx.Deadline(); ok {
		// Leave time for the rest of Shutdown: the streams' ends, the grace.
		window = min(window, time.Until(dl)-shutdownGrace-time.Second)
	}
	h.life.Lock()
	streams := make([]*stream, 0, len(h.streams))
	for s := range h.streams {
		streams = append(streams, s)
	}
	h.life.Unlock()
	defer h.waitDrained(ctx)
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
			streams[done].endAfter(endShutdown, drainField())
			streams[done] = nil
		}
		if done == len(streams) {
			break
		}
		t.Reset(drainStep)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// waitDrained waits, for shutdownGrace at most, until the drained streams
// have written their farewell and ended: Shutdown then ends the others
// (those stuck on a peer) without cutting a farewell short.
func (h *Hub) waitDrained(ctx context.Context) {
	deadline := time.Now().Add(shutdownGrace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		h.life.Lock()
		n := len(h.streams)
		h.life.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(drainStep)
	}
}

// serveDrained answers a subscribe request during a drain: a stream
// that sets the reconnection delay and ends, so that the client tries
// again soon (elsewhere, or here once the hub is back) rather than give
// up, as an EventSource does on any status but 200.
func serveDrained(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(drainField())
}
