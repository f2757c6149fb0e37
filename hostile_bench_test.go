package mercure_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
)

// BenchmarkHostilePatterns is the probe for what anonymous subscribers can
// make the hub pay with URL patterns (MAT-9): for each attack shape, it
// opens the costliest streams the hub accepts (one request, one request
// per prefix level of the victim topic, or as many as the hub takes), and
// reports the cost of each publish to https://example.com/books/N, the
// heap kept per request, and the time to replay the default history. It
// uses the public API only, so that it measures any version of the hub:
//
//	go test -run '^$' -bench HostilePatterns -benchtime 20x .
//
// MERCURE_PROBE_HISTORY sets the number of events replayed (default
// 1000): a hub without limits takes hours to replay 1 000 events to such
// streams.
func BenchmarkHostilePatterns(b *testing.B) {
	history := memstore.DefaultMaxEvents
	if v, err := strconv.Atoi(os.Getenv("MERCURE_PROBE_HISTORY")); err == nil && v > 0 {
		history = v
	}
	levels := []string{"*://*/", "https://*/", "https://example.com/", "https://example.com/books/"}
	shapes := []struct {
		name string
		// pattern is the i-th distinct pattern of the shape under prefix,
		// with about n groups.
		pattern func(prefix string, n, i int) string
	}{
		{"wildcards", func(prefix string, n, i int) string {
			return prefix + strings.Repeat("*", n) + "%23i" + strconv.Itoa(i)
		}},
		{"regexp", func(prefix string, n, i int) string {
			return prefix + strings.Repeat("(.{0,40})", n) + "%23i" + strconv.Itoa(i)
		}},
	}
	for _, shape := range shapes {
		for _, scope := range []string{"none", "plain", "one-request", "per-level", "fill"} {
			if (scope == "none" || scope == "plain") && shape.name != shapes[0].name {
				continue
			}
			b.Run(shape.name+"/"+scope, func(b *testing.B) {
				h, err := mercure.New(testHubURL, mercure.WithAnonymousSubscribers(), withHistory(b, history))
				if err != nil {
					b.Fatal(err)
				}
				th := startHubServer(b, h, h)
				ctx := context.Background()
				for i := range history - 1 {
					if _, err := h.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/books/" + strconv.Itoa(i)}}); err != nil {
						b.Fatal(err)
					}
				}
				marker := mercure.Update{Topics: []string{"urn:marker"}, ID: "marker"}
				if _, err := h.Publish(ctx, marker); err != nil {
					b.Fatal(err)
				}
				// Replaying resolves each event's topics once, for good: do
				// it before measuring what the streams keep.
				if warm, _, _ := openHostile(b, th, func(int, int) string { return "/x/:y" }); warm != nil {
					warm.Close()
				}
				var reqLevels []string
				switch scope {
				case "plain", "one-request":
					reqLevels = levels[:1]
				case "per-level":
					reqLevels = levels
				case "fill":
					for range 16 {
						reqLevels = append(reqLevels, levels...)
					}
				}
				heap0 := heapInUse()
				opened, patterns, next := 0, 0, 0
				var replay time.Duration
				for _, prefix := range reqLevels {
					pattern := func(n, i int) string { return shape.pattern(prefix, n, next+i) }
					if scope == "plain" {
						// Short, plain patterns, for comparison.
						pattern = func(n, i int) string { return "/p/" + strconv.Itoa(n) + "/" + strconv.Itoa(i) }
					}
					s, n, took := openHostile(b, th, pattern)
					if s == nil {
						continue
					}
					next += 1000
					opened++
					patterns += n
					replay = max(replay, took)
				}
				heap := heapInUse() - heap0
				if opened == 0 && scope != "none" {
					b.Skip("the hub accepted no stream of this shape")
				}
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if _, err := h.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/books/x" + strconv.Itoa(i)}}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(opened), "streams")
				b.ReportMetric(float64(patterns), "patterns")
				if opened > 0 {
					b.ReportMetric(float64(heap)/float64(opened), "heap-B/request")
				}
				b.ReportMetric(replay.Seconds(), "replay-s")
			})
		}
	}
}

// openHostile opens the costliest anonymous stream of a shape that the hub
// accepts: the most groups per pattern, then the most patterns, each tried
// from the largest down; pattern(n, i) is the i-th pattern with n
// wildcards. It returns the stream's body (nil when none is accepted),
// its number of patterns and how long it took to replay the history (the
// stream also matches the marker, the last event in history). The client
// keeps no more than a stream's connection and a small read buffer, so
// that the heap measured is mostly the hub's.
func openHostile(b *testing.B, th *testHub, pattern func(n, i int) string) (io.Closer, int, time.Duration) {
	b.Helper()
	for _, n := range []int{2000, 256, 64, 32, 16, 8, 6, 4, 2, 1} {
		for _, count := range []int{63, 32, 16, 8, 4, 2, 1} {
			q := "match=" + "urn%3Amarker"
			for i := range count {
				q += "&match_urlpattern=" + urlEscape(pattern(n, i))
			}
			start := time.Now()
			req := th.newRequest(context.Background(), http.MethodGet, q, "", "Last-Event-ID", store.Earliest)
			req.Close = true // nothing of a refused attempt outlives it
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if res.StatusCode != http.StatusOK {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				continue
			}
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() && sc.Text() != "id: marker" {
			}
			if sc.Err() != nil {
				b.Fatal(sc.Err())
			}
			b.Cleanup(func() { res.Body.Close() })
			return res.Body, count, time.Since(start)
		}
	}
	return nil, 0, 0
}

func urlEscape(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", "#", "%23", "=", "%3D").Replace(s)
}

// heapInUse returns the live heap after two collections: sync.Pools (the
// regexp package keeps its matching machines in some) survive one.
func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
