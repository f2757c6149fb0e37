package engine

import "sync"

// registryShards is how many parts an engine's registry of streams has:
// a walk over the streams (the keep-alive sweep) locks one part at a
// time, never all of them, so that a stream opening or ending waits for
// the walk of 1/registryShards of the streams at most.
const registryShards = 256

// registry is the set of an engine's open streams, in shards that a
// stream is assigned to in turn. Adding and removing a stream cost O(1)
// (a slice's end, swapped in); a walk goes shard by shard.
type registry struct {
	next   uint32 // the shard of the next stream (under the engine's life)
	shards [registryShards]registryShard
}

type registryShard struct {
	mu      sync.Mutex
	streams []*Stream
	// Shards are written by every open and close: apart, they do not
	// share a cache line.
	_ [64 - 8 - 24]byte
}

// add registers s. The caller holds e.life (see Engine.open), which
// assigns shards in turn.
func (r *registry) add(s *Stream) {
	s.regShard = uint8(r.next % registryShards)
	r.next++
	sh := &r.shards[s.regShard]
	sh.mu.Lock()
	s.regSlot = int32(len(sh.streams))
	sh.streams = append(sh.streams, s)
	sh.mu.Unlock()
}

// remove unregisters s, which add registered.
func (r *registry) remove(s *Stream) {
	sh := &r.shards[s.regShard]
	sh.mu.Lock()
	last := len(sh.streams) - 1
	if i := s.regSlot; int(i) != last {
		moved := sh.streams[last]
		sh.streams[i], moved.regSlot = moved, i
	}
	sh.streams[last] = nil
	sh.streams = sh.streams[:last]
	if cap(sh.streams) > 64 && len(sh.streams) < cap(sh.streams)/4 {
		// Most streams left: let go of the room they took.
		sh.streams = append([]*Stream(nil), sh.streams...)
	}
	sh.mu.Unlock()
}

// each calls f with the streams of each shard in turn, under that
// shard's lock only: f must not block, nor open or close streams.
func (r *registry) each(f func(streams []*Stream)) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		f(sh.streams)
		sh.mu.Unlock()
	}
}
