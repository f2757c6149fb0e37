package main

import (
	"testing"
	"time"
)

// Each scenario, small: every delivery lands, none overflows, every
// connection is closed by Shutdown (run checks both), and the
// subscribers hold no goroutine each: the engine runs the in-memory
// connections as it runs sockets its poller watches, which is what the
// simulation measures.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("opens hundreds of subscribers")
	}
	const n = 400
	o := options{updates: 3, selective: 100, workers: 2, dataSize: 10, idle: 50 * time.Millisecond, keepAlive: 15 * time.Second, timeout: time.Minute}
	for _, name := range []string{"fanout", "exact", "urlpattern"} {
		t.Run(name, func(t *testing.T) {
			r, err := run(name, n, o)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(o.selective)
			if name == "fanout" {
				want = n * int64(o.updates)
			}
			if r.Deliveries != want || r.Overflows != 0 {
				t.Errorf("%d deliveries and %d overflows, want %d and none", r.Deliveries, r.Overflows, want)
			}
			if r.Goroutines > 40 {
				t.Errorf("%d goroutines with %d subscribers open: want none per subscriber", r.Goroutines, n)
			}
			if r.HeapPerSub <= 0 || r.ProbeMaxUS <= 0 || (r.CPUPerUpdateUS <= 0 && cpuTime() > 0) {
				t.Errorf("figures missing: %+v", r)
			}
		})
	}
}
