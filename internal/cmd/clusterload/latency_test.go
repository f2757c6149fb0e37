package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A quantile is known within the buckets' 5 %, over the updates sent in
// the window asked for.
func TestLatencies(t *testing.T) {
	start := time.Unix(1000, 0)
	l := newLatencies(start)
	for i := range 100 {
		sent := start.Add(500 * time.Millisecond)
		l.record(sent, sent.Add(time.Duration(i+1)*time.Millisecond))
	}
	late := start.Add(10 * time.Second)
	l.record(late, late.Add(3*time.Second))
	for _, c := range []struct {
		from, to time.Time
		q        float64
		want     time.Duration
		n        int64
	}{
		{start, start.Add(time.Second), 0.5, 50 * time.Millisecond, 100},
		{start, start.Add(time.Second), 0.99, 99 * time.Millisecond, 100},
		{start, start.Add(time.Minute), 1, 3 * time.Second, 101},
		{late, late.Add(time.Second), 0.5, 3 * time.Second, 1},
		{start.Add(time.Second), late, 0.5, 0, 0},
	} {
		got, n := l.quantile(c.from, c.to, c.q)
		if n != c.n || got < c.want || float64(got) > 1.05*float64(c.want) {
			t.Errorf("q%v from %v to %v: %v over %d, want %v (within 5%% above) over %d",
				c.q, c.from.Sub(start), c.to.Sub(start), got, n, c.want, c.n)
		}
	}
}

// The tap reads the time an update was first sent in its data line, in
// whatever pieces the stream arrives.
func TestLatencyTap(t *testing.T) {
	start := time.Now().Add(-time.Second)
	l := newLatencies(start)
	tap := &latencyTap{lat: l}
	stream := fmt.Sprintf(": hi\n\nid: p\n\nid: A1\ndata: update A1 t=%d\n\nid: B1\ndata: update B1 t=%d\n\n", start.UnixNano(), start.UnixNano())
	for piece := range strings.SplitSeq(stream, "u") {
		tap.Write([]byte(piece))
		tap.Write([]byte("u"))
	}
	if _, n := l.quantile(start, time.Now().Add(time.Second), 0.5); n != 2 {
		t.Fatalf("%d deliveries recorded, want 2", n)
	}
}
