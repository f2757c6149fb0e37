package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure/storetest"
)

func BenchmarkAppend(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		s := open(b, filepath.Join(storetest.TempDir(b), "hub.db"))
		defer s.Close()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := s.Append(context.Background(), storetest.NewEvent(fmt.Sprint("e", i))); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := open(b, filepath.Join(storetest.TempDir(b), "hub.db"))
		defer s.Close()
		b.ReportAllocs()
		b.SetParallelism(16)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Append(context.Background(), storetest.NewEvent(fmt.Sprint("e", n.Add(1)))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkReplayRecentCursor replays the last 10 events of a 100 000
// event history: the cost must not grow with the history.
func BenchmarkReplayRecentCursor(b *testing.B) {
	const n = 100000
	s := open(b, filepath.Join(storetest.TempDir(b), "hub.db"))
	defer s.Close()
	fill(b, s, n)
	bl, err := s.Replay(context.Background(), store.Earliest)
	if err != nil {
		b.Fatal(err)
	}
	var cursor string
	i := 0
	for e := range bl.Events {
		if i == n-11 {
			cursor = e.ID
			break
		}
		i++
	}
	b.ReportAllocs()
	for b.Loop() {
		_, evs := replay(b, s, cursor)
		if len(evs) != 10 {
			b.Fatalf("%d events", len(evs))
		}
	}
}
