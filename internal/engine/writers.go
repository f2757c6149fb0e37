package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The writers of detached streams: one goroutine per shard, a shard per
// processor. A stream belongs to one shard for its life, so that the
// dispatcher's wake-ups and a writer's work meet on that shard's lock
// only, never on one shared by all writers. Writes never block, so a
// processor needs no more than one writer.

// A stream's scheduling state (Stream.sched).
const (
	schedIdle    uint32 = iota // waits for a reason to run
	schedQueued                // on its shard's run queue
	schedRunning               // its writer runs it
	schedAgain                 // woken while running: runs once more
	schedEnded                 // its connection is closed
)

// writerIdle is how long a writer waits for work before it exits.
const writerIdle = 2 * time.Second

// writers is an engine's pool of writers.
type writers struct {
	shards []shard
	next   atomic.Uint32
	wg     sync.WaitGroup
}

// shard is the run queue of one writer.
type shard struct {
	w       *writers
	mu      sync.Mutex
	queue   []*Stream
	spare   []*Stream
	running bool // its writer goroutine is alive
	wake    chan struct{}
	count   func() int // detached streams left
}

func (w *writers) init(e *Engine) {
	w.shards = make([]shard, max(1, runtime.GOMAXPROCS(0)))
	for i := range w.shards {
		w.shards[i] = shard{w: w, wake: make(chan struct{}, 1), count: e.conns.count}
	}
}

// assign returns the shard of a new stream.
func (w *writers) assign() uint32 {
	return (w.next.Add(1) - 1) % uint32(len(w.shards))
}

// schedule puts s on its shard's run queue, unless it is there already
// or ended; a running stream runs again.
func (w *writers) schedule(s *Stream) {
	for {
		switch s.sched.Load() {
		case schedIdle:
			if s.sched.CompareAndSwap(schedIdle, schedQueued) {
				w.shards[s.conns.shard].push(s)
				return
			}
		case schedRunning:
			if s.sched.CompareAndSwap(schedRunning, schedAgain) {
				return
			}
		default: // queued, again, ended
			return
		}
	}
}

// wakeAll makes idle writers look again: the last stream ended, and they
// exit.
func (w *writers) wakeAll() {
	for i := range w.shards {
		select {
		case w.shards[i].wake <- struct{}{}:
		default:
		}
	}
}

// push queues s, starting the shard's writer if it is not running.
func (sh *shard) push(s *Stream) {
	sh.mu.Lock()
	sh.queue = append(sh.queue, s)
	start := !sh.running
	if start {
		sh.running = true
		sh.w.wg.Add(1)
	}
	sh.mu.Unlock()
	if start {
		go sh.run()
		return
	}
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// run runs the shard's queued streams until there is no work for
// writerIdle, or no detached stream is left.
func (sh *shard) run() {
	defer sh.w.wg.Done()
	var sc scratch
	var idle *time.Timer
	for {
		sh.mu.Lock()
		q := sh.queue
		if len(q) == 0 {
			if sh.count() == 0 {
				sh.running = false
				sh.mu.Unlock()
				return
			}
			sh.mu.Unlock()
			if idle == nil {
				idle = time.NewTimer(writerIdle)
				defer idle.Stop()
			} else {
				idle.Reset(writerIdle)
			}
			select {
			case <-sh.wake:
				// Whoever woke this writer (a dispatch, on a publisher's
				// goroutine) handed it the processor's next turn, ahead of
				// the other goroutines that are ready: under load, the
				// publishers whose requests have arrived. Let them run
				// first: their updates join this pass, and each stream
				// writes them in one call rather than one call each.
				runtime.Gosched()
				continue
			case <-idle.C:
			}
			sh.mu.Lock()
			if len(sh.queue) == 0 {
				sh.running = false
				sh.mu.Unlock()
				return
			}
			sh.mu.Unlock()
			continue
		}
		sh.queue, sh.spare = sh.spare[:0], nil
		sh.mu.Unlock()
		for i, s := range q {
			q[i] = nil
			s.sched.Store(schedRunning)
			s.runDetached(&sc)
			if !s.sched.CompareAndSwap(schedRunning, schedIdle) && s.sched.CompareAndSwap(schedAgain, schedQueued) {
				sh.push(s)
			}
		}
		if cap(sc.iov) > 4096 {
			sc.iov = nil // a large batch is written: do not keep its buffer
		}
		sh.mu.Lock()
		sh.spare = q[:0]
		sh.mu.Unlock()
	}
}
