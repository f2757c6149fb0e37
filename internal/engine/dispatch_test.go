package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/testwait"
)

// MAT-9: URL patterns are evaluated without the engine's lock: while one
// dispatch is held after the look-up, streams open, and the exact
// subscribers of the event being dispatched already have it.
func TestDispatchHoldsNoLockAfterTheLookUp(t *testing.T) {
	e := newEngine(t, nil)
	f := &feeder{e: e}
	exactW, stopExact := serve(t, e, nil, exact("x"))
	defer stopExact()
	o, release := holding()
	defer release()
	_, stopHeld := serve(t, e, o, pattern(t, "https://example.com/:a"))
	defer stopHeld()

	f.push(true, "d", "x", "https://example.com/1")
	<-o.held // evaluating the pattern subscriber's rights
	testwait.For(t, "the exact subscriber to get the event while the dispatch is held", func() bool { n, _ := exactW.state(); return n == 1 })
	// A new stream registers, and another closes, while it is held.
	_, stopLate := serve(t, e, nil, pattern(t, "https://example.com/:b/:c"))
	stopLate()
	release()
	if err := e.WaitDispatched(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Pushing records and returns; the fan-out happens after. While a
// dispatch is held in the middle, pushes return, streams open and close
// (registration does not wait for it), and afterwards each stream has
// exactly what it should: the held event and the next for the one that
// was open, only the next for the one that opened meanwhile (recorded
// before it opened, the held event is not live for it), and nothing
// queued for the one that closed.
func TestPushDoesNotWaitForFanOut(t *testing.T) {
	e := newEngine(t, nil)
	f := &feeder{e: e}
	o, release := holding()
	defer release()
	before, stopBefore := serve(t, e, o, exact("x"))
	defer stopBefore()
	leaving, stopLeaving := serve(t, e, nil, exact("x"))

	f.push(true, "first", "x")
	<-o.held
	during, stopDuring := serve(t, e, nil, exact("x"))
	defer stopDuring()
	stopLeaving()
	f.push(false, "second", "x")
	if n, _ := before.state(); n != 0 {
		t.Fatalf("%d events delivered while the dispatch was held", n)
	}
	release()
	testwait.For(t, "both events to reach the first stream", func() bool { n, _ := before.state(); return n == 2 })
	testwait.For(t, "the second event to reach the stream opened meanwhile", func() bool { n, _ := during.state(); return n == 1 })
	if err := e.WaitDispatched(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := before.String(); !strings.Contains(got, "data: first") || strings.Index(got, "data: second") < strings.Index(got, "data: first") {
		t.Fatalf("the first stream got %q: want first, then second", got)
	}
	if got := during.String(); strings.Contains(got, "first") {
		t.Fatalf("the stream opened after the first event was pushed got it live: %q", got)
	}
	if n, _ := leaving.state(); n != 0 {
		t.Fatalf("the stream closed during the dispatch got %d events", n)
	}
	testwait.For(t, "the queues to empty", func() bool { return e.QueuedBytes() == 0 })
}

// Limits.MaxPendingUpdates: an engine that cannot keep up holds
// publishers back (WaitRoom) rather than pile events up; a waiter whose
// context ends gives up; the others go through once the dispatcher
// catches up; Stop releases them with ErrClosed.
func TestWaitRoom(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Limits.MaxPendingUpdates = 2 })
	f := &feeder{e: e}
	o, release := holding()
	defer release()
	_, stop := serve(t, e, o, exact("x"))
	defer stop()
	f.publish(true, "1", "x")
	<-o.held
	f.publish(false, "2", "x")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.WaitRoom(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRoom over the backlog: %v, want the context's deadline", err)
	}
	room := make(chan error, 1)
	go func() { room <- e.WaitRoom(context.Background()) }()
	select {
	case err := <-room:
		t.Fatalf("WaitRoom returned (%v) while the backlog was full", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-room; err != nil {
		t.Fatal(err)
	}
	f.publish(false, "3", "x")
	f.publish(false, "4", "x")
	e.Stop()
	if err := e.WaitRoom(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitRoom after Stop: %v", err)
	}
}

// A stream stuck on a peer that stopped reading is cut, on overflow and
// at shutdown, without an engine-wide lock held. Its status line is out
// (the peer stopped reading after it): a stream whose status line is not
// is refused rather than cut on overflow (see
// TestStreamAbortedBeforeItsHeadersDoesNotStart).
func TestAbortsHappenOutsideEngineLocks(t *testing.T) {
	for _, via := range []string{"overflow", "shutdown"} {
		t.Run(via, func(t *testing.T) {
			e := New(func() Config {
				c := testConfig(t)
				c.Limits.QueueEvents = 1
				c.StallGrace = time.Millisecond // past its queue's bound, a stream stuck that long overflows
				return c
			}())
			f := &feeder{e: e}
			w := newBlockingWriter()
			w.engine, w.passes = e, 1 // the position block
			_, stop, err := serveErr(e, w, nil, exact("x"))
			if err != nil {
				t.Fatal(err)
			}
			f.push(false, "1", "x")
			testwait.For(t, "the stream to block on its peer", w.writing.Load)
			if via == "overflow" {
				f.push(false, "2", "x") // queued
				// Past the queue's bound, once the stream has been stuck
				// for the stall grace: the stream is cut.
				testwait.For(t, "the stream to be cut", func() bool {
					f.push(false, "n", "x")
					if err := e.WaitDispatched(context.Background()); err != nil {
						t.Fatal(err)
					}
					return e.Counters().Overflows.Load() == 1
				})
				if !w.cut.Load() { // the dispatch that counted it cut it
					t.Fatal("the write was not cut on overflow")
				}
			}
			e.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
			defer cancel()
			if err := e.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			stop()
			if err := e.WaitDispatched(ctx); err != nil {
				t.Fatal(err)
			}
			if n := w.underLock.Load(); n != 0 {
				t.Fatalf("a write deadline was set %d times under an engine-wide lock", n)
			}
		})
	}
}

// blockingWriter is a ResponseWriter whose writes, past the first
// passes, block until a write deadline in the past cuts them, like a peer
// that stopped reading. With engine set, it records whether the engine
// held one of its locks when the deadline was set: on HTTP/2 that is a
// message to the connection's goroutine, which must never wait on the
// engine.
type blockingWriter struct {
	httptest.ResponseRecorder
	engine    *Engine
	passes    int32 // writes that go through
	writes    atomic.Int32
	release   chan struct{}
	once      sync.Once
	writing   atomic.Bool // a write is waiting
	underLock atomic.Int32
	cut       atomic.Bool // the write was cut
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{ResponseRecorder: *httptest.NewRecorder(), release: make(chan struct{})}
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	if w.writes.Add(1) <= w.passes {
		return len(b), nil
	}
	w.writing.Store(true)
	<-w.release
	return 0, errors.New("write deadline exceeded")
}

func (w *blockingWriter) Flush() {}

func (w *blockingWriter) SetWriteDeadline(d time.Time) error {
	if d.IsZero() || d.After(time.Now()) {
		return nil
	}
	if w.engine != nil {
		for _, mu := range []*sync.Mutex{&w.engine.mu, &w.engine.life} {
			if !mu.TryLock() {
				w.underLock.Add(1)
				continue
			}
			mu.Unlock()
		}
	}
	w.once.Do(func() {
		w.cut.Store(true)
		close(w.release)
	})
	return nil
}

var _ http.ResponseWriter = (*blockingWriter)(nil)

// The dispatcher never outlives the engine's Stop by more than the
// dispatch it is in (issue 23: it could outlive Shutdown when its context
// ended): held in the middle of one fan-out with more events pending,
// Stop makes WaitDispatched wait until that dispatch is over and then
// return, the pending events dropped rather than delivered.
func TestDispatcherEndsAfterStop(t *testing.T) {
	e := newEngine(t, nil)
	f := &feeder{e: e}
	o, release := holding()
	defer release()
	held, stopHeld := serve(t, e, o, exact("x"))
	defer stopHeld()

	f.push(true, "held", "x")
	<-o.held
	for range 50 {
		f.push(false, "pending", "x")
	}
	e.Stop()
	var released atomic.Bool
	waited := make(chan error, 1)
	go func() {
		err := e.WaitDispatched(context.Background())
		if err == nil && !released.Load() {
			err = errors.New("WaitDispatched returned while the dispatcher was still in its fan-out")
		}
		waited <- err
	}()
	for range 100 { // let WaitDispatched run: it must block
		runtime.Gosched()
	}
	released.Store(true)
	release()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if got := held.String(); strings.Contains(got, "pending") {
		t.Fatalf("events pending at Stop were dispatched after it: %q", got)
	}
}
