package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestRegistryAddRemove(t *testing.T) {
	var r registry
	var live []*Stream
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			r.remove(live[i])
			live = slices.Delete(live, i, i+1)
			continue
		}
		s := &Stream{}
		r.add(s)
		live = append(live, s)
	}
	n := 0
	r.each(func(ss []*Stream) { n += len(ss) })
	if n != len(live) {
		t.Fatalf("%d streams registered, want %d", n, len(live))
	}
	for _, s := range live {
		if sh := &r.shards[s.regShard]; sh.streams[s.regSlot] != s {
			t.Fatalf("a stream is not where it says it is (shard %d, slot %d)", s.regShard, s.regSlot)
		}
	}
}

// TestWalkLocksOneShard checks that a walk of the streams (the
// keep-alive sweep's) holds one shard of the registry at a time: streams
// open and end meanwhile, but for those of that shard.
func TestWalkLocksOneShard(t *testing.T) {
	t.Parallel()
	e := newEngine(t, nil)
	e.life.Lock()
	e.streams.next = 1 // the stream opened below goes to shard 1
	e.life.Unlock()
	inWalk, release, walked := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(walked)
		first := true
		e.streams.each(func([]*Stream) {
			if first {
				first = false
				close(inWalk)
				<-release
			}
		})
	}()
	<-inWalk
	// Shard 0 is held.
	_, stop := serve(t, e, nil, exact("x"))
	if e.Streams() != 1 {
		t.Errorf("%d streams open, want 1", e.Streams())
	}
	stop()
	close(release)
	<-walked
	if e.Streams() != 0 {
		t.Errorf("%d streams open after the end, want 0", e.Streams())
	}
}

// TestDue checks the sweep's choice: the streams silent for the interval.
func TestDue(t *testing.T) {
	e := newEngine(t, nil)
	now := time.Now()
	var silent, recent []*Stream
	e.life.Lock()
	for i := range 600 {
		s := &Stream{e: e}
		if i%3 == 0 {
			s.lastWrite.Store(now.Add(-time.Minute).UnixNano())
			silent = append(silent, s)
		} else {
			s.lastWrite.Store(now.Add(-time.Second).UnixNano())
			recent = append(recent, s)
		}
		e.streams.add(s)
	}
	e.life.Unlock()
	due := e.due(now.UnixNano(), int64(15*time.Second), nil)
	for _, s := range append(silent, recent...) {
		e.streams.remove(s)
	}
	if len(due) != len(silent) {
		t.Fatalf("%d streams due, want %d", len(due), len(silent))
	}
	for _, s := range due {
		if !slices.Contains(silent, s) {
			t.Fatal("a stream that wrote a second ago is due")
		}
	}
}
