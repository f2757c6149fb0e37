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
