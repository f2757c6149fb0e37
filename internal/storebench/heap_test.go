//go:build storebench

package storebench

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure/boltstore"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/redisstore"
	"github.com/mercurekit/mercure/storetest"
)

// BenchmarkReplayHeldHeap measures the heap that one reader replaying from
// Earliest holds once it has got its first event, with 300 updates of
// 1 MiB in history (metric MiB-held; run it with -benchtime 1x: each run
// appends the 300 MiB again). For the memory store, whose history is in
// memory anyway, it is the heap a reader keeps alive of a history that
// publishers replaced under it (the hub's default store: 1 000 updates,
// 64 MiB).
func BenchmarkReplayHeldHeap(b *testing.B) {
	const n, size = 300, 1 << 20
	for _, kind := range storeKinds {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				var held int64
				if kind == "memory" {
					held = memoryHeld(b, n, size)
				} else {
					held, _ = storetest.PinnedHeap(b, openStore(b, kind), n, size, store.Earliest)
				}
				b.ReportMetric(float64(held)/(1<<20), "MiB-held")
			}
		})
	}
}

// BenchmarkReplay replays a history of 64 updates of 1 KiB, 100 KiB and
// 400 KiB from each store: the time and allocations of reading a backlog
// page by page (one op is one whole replay).
func BenchmarkReplay(b *testing.B) {
	const n = 64
	for _, kind := range storeKinds {
		for _, size := range []int{1 << 10, 100 << 10, 400 << 10} {
			b.Run(fmt.Sprintf("%s/%dKiB", kind, size>>10), func(b *testing.B) {
				var s store.Store
				if kind == "memory" {
					m, err := memstore.New(memstore.WithMaxEvents(n), memstore.WithMaxBytes(0))
					if err != nil {
						b.Fatal(err)
					}
					s = m
				} else {
					s = openStore(b, kind)
				}
				data := strings.Repeat("x", size)
				for i := range n {
					e := &store.Event{Topics: []string{topic}, ID: fmt.Sprint("r", i), Data: data, Time: time.Now()}
					if err := s.Append(context.Background(), e); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(n * size))
				b.ResetTimer()
				for range b.N {
					bl, err := s.Replay(context.Background(), store.Earliest)
					if err != nil {
						b.Fatal(err)
					}
					got := 0
					for _, err := range bl.Events {
						if err != nil {
							b.Fatal(err)
						}
						got++
					}
					if got != n {
						b.Fatalf("replayed %d events, want %d", got, n)
					}
				}
			})
		}
	}
}

// memoryHeld replays the default memory store's history of n updates of
// size bytes, gets the first event, replaces the history, and returns the
// heap the reader keeps alive.
func memoryHeld(b *testing.B, n, size int) int64 {
	s, err := memstore.New() // the default store's settings
	if err != nil {
		b.Fatal(err)
	}
	fill := func(prefix string) {
		data := strings.Repeat("x", size)
		for i := range n {
			e := &store.Event{Topics: []string{topic}, ID: fmt.Sprint(prefix, i), Data: data, Time: time.Now()}
			if err := s.Append(context.Background(), e); err != nil {
				b.Fatal(err)
			}
		}
	}
	fill("old")
	bl, err := s.Replay(context.Background(), store.Earliest)
	if err != nil {
		b.Fatal(err)
	}
	next, stop := iter.Pull2(bl.Events)
	if _, err, ok := next(); !ok || err != nil {
		b.Fatalf("no first event: %v", err)
	}
	fill("new")
	with := liveHeap()
	stop()
	held := with - liveHeap()
	runtime.KeepAlive(s)
	return held
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// openStore returns a store of kind (bolt, redis or postgres) that keeps
// at least 1 000 events, closed when b ends.
func openStore(b *testing.B, kind string) store.Store {
	var st interface {
		store.Store
		Close() error
	}
	var err error
	switch kind {
	case "bolt":
		st, err = boltstore.Open(filepath.Join(b.TempDir(), "hub.db"), boltstore.WithMaxEvents(1000))
	case "redis":
		addr := os.Getenv("MERCURE_TEST_REDIS")
		if addr == "" {
			b.Skip("set MERCURE_TEST_REDIS to run the Redis benchmarks")
		}
		key := fmt.Sprintf("mercure-bench:%d:%d:%d", os.Getpid(), time.Now().UnixNano(), keyN.Add(1))
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		b.Cleanup(func() {
			rdb.Del(context.Background(), key, key+":ids", key+":n")
			rdb.Close()
		})
		st, err = redisstore.New(rdb, key, redisstore.WithMaxLen(0))
	case "postgres":
		pool, prefix := pgPool(b)
		st, err = pgstore.New(context.Background(), pool, pgstore.WithPrefix(prefix), pgstore.WithMaxEvents(1000))
	default:
		b.Fatalf("unknown store %q", kind)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
