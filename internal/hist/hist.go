// Package hist is a fixed-bucket histogram of durations made of atomic
// counters, for the hub's metrics: observing costs a short scan and two
// or three atomic adds, and never allocates.
package hist

import (
	"math"
	"sync/atomic"
	"time"
)

// Bounds are the upper bounds of the buckets, in seconds: from 100µs to
// 10s.
var Bounds = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

var boundsNS = func() (b [len(Bounds)]int64) {
	for i, s := range Bounds {
		b[i] = int64(math.Round(s * 1e9))
	}
	return b
}()

// Histogram counts durations by bucket. The zero value is ready to use.
type Histogram struct {
	buckets [len(Bounds) + 1]atomic.Uint64 // the last is +Inf
	count   atomic.Uint64
	sumNS   atomic.Int64
}

// Observe counts d.
func (h *Histogram) Observe(d time.Duration) {
	ns := int64(max(d, 0))
	i := 0
	for i < len(boundsNS) && ns > boundsNS[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNS.Add(ns)
	h.count.Add(1) // last: a snapshot's count never exceeds its buckets' sum
}

// Snapshot returns the cumulative bucket counts (Buckets[i] counts the
// observations of at most Bounds[i] seconds), the count of all and their
// sum in seconds.
func (h *Histogram) Snapshot() (buckets []uint64, count uint64, sum float64) {
	buckets = make([]uint64, len(Bounds))
	var cum uint64
	for i := range Bounds {
		cum += h.buckets[i].Load()
		buckets[i] = cum
	}
	// Read apart from the buckets: under load the count may run a little
	// ahead of them; the snapshot stays consistent.
	count = max(h.count.Load(), cum)
	return buckets, count, float64(h.sumNS.Load()) / 1e9
}
