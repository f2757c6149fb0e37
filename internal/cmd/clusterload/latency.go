package main

import (
	"bytes"
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// Delivery latencies are counted in buckets whose bounds grow by 5 %,
// from 100 µs, so that a quantile is known within 5 %; each second of
// the run, by when the update was first sent, has its own counts, so
// that the schedule's events each get their own quantiles.
const (
	latencyBuckets = 300 // up to about 230 s
	latencySeconds = 1200
	latencyGrowth  = 1.05
	latencyFloor   = 100 * time.Microsecond
)

// latencies counts, for each second of the run, the time each update sent
// then took to reach each subscriber: from its first POST (the publisher
// retries it, its data unchanged, until acknowledged) to the subscriber's
// read of it, live or replayed. It is safe for concurrent use.
type latencies struct {
	start  time.Time
	counts [latencySeconds][latencyBuckets]atomic.Int64
}

func newLatencies(start time.Time) *latencies { return &latencies{start: start} }

// bucket returns the bucket of d.
func bucket(d time.Duration) int {
	if d <= latencyFloor {
		return 0
	}
	b := 1 + int(math.Log(float64(d)/float64(latencyFloor))/math.Log(latencyGrowth))
	return min(b, latencyBuckets-1)
}

// upper returns the upper bound of bucket b.
func upper(b int) time.Duration {
	return time.Duration(float64(latencyFloor) * math.Pow(latencyGrowth, float64(b)))
}

// second returns the second of the run of t.
func (l *latencies) second(t time.Time) int {
	return min(max(int(t.Sub(l.start)/time.Second), 0), latencySeconds-1)
}

// record counts an update first sent at sent and received at got.
func (l *latencies) record(sent, got time.Time) {
	l.counts[l.second(sent)][bucket(got.Sub(sent))].Add(1)
}

// quantile returns the q-quantile (0.99 for the 99th percentile) of the
// latencies of the updates first sent from from to before to, within 5 %
// above, and how many deliveries it was taken over; 0 and 0 if none.
func (l *latencies) quantile(from, to time.Time, q float64) (time.Duration, int64) {
	var sum [latencyBuckets]int64
	var n int64
	for s := l.second(from); s < l.second(to) || s == l.second(from); s++ {
		for b := range sum {
			c := l.counts[s][b].Load()
			sum[b] += c
			n += c
		}
	}
	if n == 0 {
		return 0, 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for b, c := range sum {
		if seen += c; seen >= rank {
			return upper(b), n
		}
	}
	return upper(latencyBuckets - 1), n
}

// latencyTap is written what a subscriber reads of its stream, and
// records the latency of each update in it: its data line says when it
// was first sent (update ID t=UNIXNANO).
type latencyTap struct {
	lat     *latencies
	partial []byte
}

var sentMark = []byte(" t=")

func (t *latencyTap) Write(p []byte) (int, error) {
	now := time.Now()
	rest := p
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			t.partial = append(t.partial, rest...)
			return len(p), nil
		}
		line := rest[:i]
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = t.partial[:0]
		}
		rest = rest[i+1:]
		if !bytes.HasPrefix(line, []byte("data: update ")) {
			continue
		}
		if j := bytes.LastIndex(line, sentMark); j >= 0 {
			if ns, err := strconv.ParseInt(string(line[j+len(sentMark):]), 10, 64); err == nil {
				t.lat.record(time.Unix(0, ns), now)
			}
		}
	}
}
