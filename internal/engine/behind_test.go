package engine

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/testwait"
)

// A queue past its bound ends its stream for overflow only when the
// stream is behind by its own connection (issue 41): the connection took
// nothing for the stall grace (a goroutine's write stuck that long, or a
// detached stream blocked with no progress), or took so little that what
// the writer handed it has not gone out within the write timeout. A
// stream whose writer has not reached it yet, or whose connection takes
// bytes, keeps its events past the bound. Until the stream is live (its
// headers and replay written by its handler) the bound is hard.
func TestQueuePastItsBoundBlamesOnlyItsConnection(t *testing.T) {
	const grace, timeout = time.Second, 4 * time.Second
	e := newEngine(t, func(c *Config) {
		c.Limits.QueueEvents = 2
		c.WriteTimeout, c.StallGrace = timeout, grace
	})
	now := time.Now()
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	for _, c := range []struct {
		name     string
		set      func(s *Stream)
		overflow bool
	}{
		{"not reached by its writer yet", func(*Stream) {}, false},
		{"its writer took its events an instant ago", func(s *Stream) { s.sending = ago(time.Millisecond) }, false},
		{"a goroutine's write under way", func(s *Stream) { s.sending = ago(grace); s.writing.Store(ago(grace / 2)) }, false},
		{"a goroutine's write stuck", func(s *Stream) { s.sending = ago(grace); s.writing.Store(ago(grace)) }, true},
		{"blocked, taking bytes", func(s *Stream) { s.blocked, s.sending = true, ago(grace); s.lastWrite.Store(ago(grace / 2)) }, false},
		{"blocked, taking nothing", func(s *Stream) { s.blocked, s.sending = true, ago(grace); s.lastWrite.Store(ago(grace)) }, true},
		{"taking bytes, too few", func(s *Stream) { s.blocked, s.sending = true, ago(timeout); s.lastWrite.Store(ago(grace / 2)) }, true},
		{"not live", func(s *Stream) { s.live = false }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := e.newStream(newRecorder(), Spec{Owner: &owner{}, Client: "c"})
			s.live = true
			s.lastWrite.Store(now.UnixNano())
			c.set(s)
			for seq := range uint64(3) { // past the bound with the third
				if _, ok, _ := s.enqueue(testEvent(seq+1), now.UnixNano()); !ok {
					if !c.overflow || seq < 2 {
						t.Fatalf("event %d: overflow, want it queued", seq+1)
					}
					if s.why != EndQueueOverflow || s.state != stateAborted {
						t.Fatalf("state %v for %v, want aborted for overflow", s.state, s.why)
					}
					return
				}
			}
			if c.overflow {
				t.Fatalf("%d events queued past a bound of 2, want an overflow", len(s.queue))
			}
		})
	}
}

// gatedRecorder is a recorder whose writes wait while its gate is shut.
type gatedRecorder struct {
	*recorder
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	waiting atomic.Bool
}

func (w *gatedRecorder) shut() {
	w.mu.Lock()
	w.gate = make(chan struct{})
	w.mu.Unlock()
}

func (w *gatedRecorder) open() {
	w.mu.Lock()
	if w.gate != nil {
		close(w.gate)
		w.gate = nil
	}
	w.mu.Unlock()
}

func (w *gatedRecorder) Write(b []byte) (int, error) {
	w.mu.Lock()
	g := w.gate
	w.mu.Unlock()
	if g != nil {
		w.waiting.Store(true)
		<-g
		w.waiting.Store(false)
	}
	return w.recorder.Write(b)
}

var _ http.ResponseWriter = (*gatedRecorder)(nil)

// A stream whose writer is held (not by its connection: well within the
// stall grace) keeps every event past its queue's bound; its writer then
// takes a queue's worth at a time, in order, and a farewell goes after
// the last of them. Past the queues' budget, the dispatcher waits for the
// writers rather than queue more, and goes on once they have made room.
func TestQueuePastItsBoundDrainsAQueueAtATime(t *testing.T) {
	e := newEngine(t, func(c *Config) {
		c.Limits.QueueEvents, c.Limits.MaxQueuedBytes = 4, 3000
		c.WriteTimeout = time.Hour // nothing here is behind by its connection
	})
	f := &feeder{e: e}
	w := &gatedRecorder{recorder: newRecorder()}
	t.Cleanup(w.open)
	_, stop, err := serveErr(e, w, nil, exact("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	testwait.For(t, "the position block", func() bool { return strings.HasPrefix(w.String(), "id: ") })
	w.reset()
	w.shut()
	data := strings.Repeat("d", 80) // about 100 bytes an event
	f.push(false, "first "+data, "x")
	testwait.For(t, "the writer to wait", w.waiting.Load)
	// About 3 500 bytes queued: past the bound, then past the budget, with
	// what is left in the feed within its own bound (MaxQueuedBytes
	// pending: past it, the feed would drop them for a gap).
	const n = 25
	for i := range n {
		f.push(false, fmt.Sprint(i, " ", data), "x")
	}
	testwait.For(t, "the dispatcher to wait for the budget", e.dispatchWaits.Load)
	if e.counters.Overflows.Load() != 0 {
		t.Fatal("an overflow, want the events kept past the bound")
	}
	s := e.snapshot()[0]
	s.mu.Lock()
	queued := len(s.queue)
	s.mu.Unlock()
	if queued <= 4 || queued >= n {
		t.Fatalf("%d events queued, want more than the bound (4) and fewer than pushed (%d): the dispatcher waits at the budget", queued, n)
	}
	w.open()
	testwait.For(t, "every event", func() bool { return strings.Contains(w.String(), fmt.Sprint("data: ", n-1, " ")) })
	inOrder(t, w.String(), "first ", n)

	// Past the bound, within the budget: a queue's worth per write, and
	// the farewell after the last event.
	w.reset()
	w.shut()
	f.push(false, "first "+data, "x")
	testwait.For(t, "the writer to wait", w.waiting.Load)
	const m = 10
	for i := range m {
		f.push(false, fmt.Sprint(i, " ", data), "x")
	}
	if err := e.WaitDispatched(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.End(EndShutdown, []byte("retry: 1000\n\n"))
	w.open()
	testwait.For(t, "every event, then the farewell", func() bool { return strings.HasSuffix(w.String(), "retry: 1000\n\n") })
	inOrder(t, w.String(), "first ", m)
	// The first event, then a queue's worth (4 events) per write and
	// flush at most: the 10 take 3 flushes or more.
	if _, fl := w.state(); fl < 1+(m+3)/4 {
		t.Fatalf("%d flushes for 1 + %d events, want a queue's worth (4 events) per write at most", fl, m)
	}
	if err := e.WaitDispatched(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.counters.Overflows.Load() != 0 || e.QueuedBytes() != 0 {
		t.Fatalf("%d overflows, %d bytes queued: want none", e.counters.Overflows.Load(), e.QueuedBytes())
	}
}

// inOrder fails t unless got holds first, then the events numbered 0 to
// n-1, in order.
func inOrder(t *testing.T, got, first string, n int) {
	t.Helper()
	last := strings.Index(got, "data: "+first)
	if last < 0 {
		t.Fatalf("no %q in %q", first, got)
	}
	for i := range n {
		at := strings.Index(got, fmt.Sprint("data: ", i, " "))
		if at < last {
			t.Fatalf("event %d missing or out of order in %q", i, got)
		}
		last = at
	}
}
