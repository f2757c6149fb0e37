package topicurl

import (
	"strings"
	"testing"
	"time"
)

func TestZZSlow(t *testing.T) {
	r := mustNew(t, defaultHub)
	for _, n := range []int{1024, 2048, 4096, 8192, 16384} {
		for _, c := range []struct{ name, s string }{
			{"at", "http://" + strings.Repeat("a@", n/2)},
			{"user", "http://" + strings.Repeat("a", n-4) + "@x/"},
			{"segments", strings.Repeat("/a", n/2)},
			{"emptysegs", strings.Repeat("/", n)},
			{"pctuser", "http://" + strings.Repeat("é", n/2) + "@x/"},
		} {
			best := time.Hour
			for range 3 {
				t0 := time.Now()
				r.Reserved(c.s[:n])
				best = min(best, time.Since(t0))
			}
			t.Logf("n=%5d %-9s: %v", n, c.name, best)
		}
	}
}
