package mercure_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/mercurekit/mercure"
)

// BenchmarkStreamFanout publishes one update to n subscribers of one
// topic over loopback, and waits until every one has read it: the cost of
// the streams' writers, net/http's goroutines or the detached streams'
// pool. The subscribers read raw connections, each on a goroutine of its
// own, in the benchmark's process.
//
//	go test -run '^$' -bench StreamFanout -benchmem
func BenchmarkStreamFanout(b *testing.B) {
	modes := []struct {
		name string
		opts []mercure.Option
	}{
		{"goroutine", []mercure.Option{mercure.WithGoroutineStreams()}},
		{"detached", []mercure.Option{mercure.WithDetachedStreams()}},
	}
	for _, mode := range modes {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/subs=%d", mode.name, n), func(b *testing.B) {
				th := newTestHub(b, append(mode.opts, mercure.WithLimits(mercure.Limits{MaxConnections: n}))...)
				got := make(chan struct{}, n)
				for range n {
					rs := dialStream(b, th, "match=x")
					go func() {
						for {
							line, err := rs.br.ReadSlice('\n')
							if err != nil {
								return
							}
							if bytes.HasPrefix(line, []byte("id: ")) {
								got <- struct{}{}
							}
						}
					}()
				}
				update := mercure.Update{Topics: []string{"x"}, Data: "a short update, as most are"}
				b.ResetTimer()
				for b.Loop() {
					if _, err := th.Publish(context.Background(), update); err != nil {
						b.Fatal(err)
					}
					for range n {
						<-got
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
			})
		}
	}
}

// BenchmarkIdleStreamHeap opens n streams of one topic, delivers them one
// update, and reports the live heap per idle stream: the hub's side and
// the benchmark's raw client side (a net.Conn and a 512-byte buffer,
// about 0.5 KB) together. See docs/performance.md for the hub's side
// alone, measured from another process.
//
//	go test -run '^$' -bench IdleStreamHeap -benchtime 1x
func BenchmarkIdleStreamHeap(b *testing.B) {
	modes := []struct {
		name string
		opts []mercure.Option
	}{
		{"goroutine", []mercure.Option{mercure.WithGoroutineStreams()}},
		{"detached", []mercure.Option{mercure.WithDetachedStreams()}},
	}
	const n = 1000
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			for b.Loop() {
				th := newTestHub(b, append(mode.opts, mercure.WithLimits(mercure.Limits{MaxConnections: n}))...)
				before := heapInUse()
				streams := make([]*rawStream, n)
				for i := range streams {
					streams[i] = dialStream(b, th, "match=x")
				}
				if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: "one"}); err != nil {
					b.Fatal(err)
				}
				for _, rs := range streams {
					for {
						line, err := rs.br.ReadSlice('\n')
						if err != nil {
							b.Fatal(err)
						}
						if bytes.HasPrefix(line, []byte("data: ")) {
							break
						}
					}
				}
				b.ReportMetric(float64(heapInUse()-before)/n, "heap-B/stream")
				for _, rs := range streams {
					rs.conn.Close()
				}
			}
		})
	}
}
