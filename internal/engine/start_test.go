package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// statusRecorder is a recorder that records its status and the write
// deadlines in the past set on it (cuts).
type statusRecorder struct {
	*recorder
	status atomic.Int32
	cuts   atomic.Int32
}

func (w *statusRecorder) WriteHeader(status int) { w.status.CompareAndSwap(0, int32(status)) }

func (w *statusRecorder) SetWriteDeadline(d time.Time) error {
	if !d.IsZero() && !d.After(time.Now()) {
		w.cuts.Add(1)
	}
	return nil
}

// A stream whose queue overflows before its headers are written does not
// start: Serve writes nothing, cuts nothing (the caller answers the
// request: a refusal), and returns ErrNotStarted for ErrBehind; the
// stream counts neither as opened nor as closed, nor as an overflow. One
// whose queue overflows once its headers are written (here, during its
// replay) started: it is cut, and counted opened, closed and overflowed.
func TestStreamAbortedBeforeItsHeadersDoesNotStart(t *testing.T) {
	for _, headers := range []bool{false, true} {
		name := map[bool]string{false: "before its headers", true: "after its headers"}[headers]
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, func(c *Config) { c.Limits.QueueEvents = 1 })
			f := &feeder{e: e}
			overflow := func() {
				for i := range 2 { // the first is queued, the second overflows
					f.push(false, string(rune('a'+i)), "x")
				}
				if err := e.WaitDispatched(context.Background()); err != nil {
					t.Error(err)
				}
			}
			w := &statusRecorder{recorder: newRecorder()}
			o := &owner{}
			spec := Spec{Owner: o, Client: "c", Matchers: []Matcher{exact("x")}}
			if headers {
				spec.Replay = func(rp *Replay) (uint64, bool) {
					if rp.Flush() != nil {
						return 0, false
					}
					overflow()
					return 0, rp.Write([]byte(": history\n\n")) == nil
				}
			} else {
				spec.Opened = func(*Stream) { overflow() }
			}
			err := e.Serve(w, httptest.NewRequest(http.MethodGet, "/", nil), spec)
			c := e.Counters()
			switch {
			case !headers && (!errors.Is(err, ErrNotStarted) || !errors.Is(err, ErrBehind)):
				t.Fatalf("Serve: %v, want ErrNotStarted for ErrBehind", err)
			case !headers && (w.status.Load() != 0 || w.String() != "" || w.cuts.Load() != 0):
				t.Fatalf("status %d, body %q, %d cuts: want nothing written, nothing cut", w.status.Load(), w.String(), w.cuts.Load())
			case !headers && (c.StreamsOpened.Load() != 0 || c.StreamsClosed[EndQueueOverflow].Load() != 0 || c.Overflows.Load() != 0):
				t.Fatalf("opened %d, closed for overflow %d, overflows %d: want none", c.StreamsOpened.Load(), c.StreamsClosed[EndQueueOverflow].Load(), c.Overflows.Load())
			case headers && err != nil:
				t.Fatalf("Serve: %v, want nil for a stream that started", err)
			case headers && (w.status.Load() != http.StatusOK || w.cuts.Load() == 0):
				t.Fatalf("status %d, %d cuts: want a stream that started, then cut", w.status.Load(), w.cuts.Load())
			case headers && (c.StreamsOpened.Load() != 1 || c.StreamsClosed[EndQueueOverflow].Load() != 1 || c.Overflows.Load() != 1):
				t.Fatalf("opened %d, closed for overflow %d, overflows %d: want one each", c.StreamsOpened.Load(), c.StreamsClosed[EndQueueOverflow].Load(), c.Overflows.Load())
			}
			if o.ended.Load() != 1 || e.Streams() != 0 {
				t.Fatalf("ended %d times, %d streams open: want it ended once, its slot freed", o.ended.Load(), e.Streams())
			}
		})
	}
}
