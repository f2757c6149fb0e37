package client_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
)

// BenchmarkSubscribe_Consume measures how many events one client reads
// from a local hub over loopback HTTP: b.N events of 100 bytes, published
// while the client reads them live.
func BenchmarkSubscribe_Consume(b *testing.B) {
	th := startHub(b, withHistory(b, 1<<20)) // a kicked slow reader resumes from history
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data := strings.Repeat("x", 100)
	topic := []string{"https://example.com/feed"}
	c := fastClient()
	connected := make(chan struct{}, 1)
	var reconnects int
	c.OnConnect = func(conn client.Connection) {
		select {
		case connected <- struct{}{}:
		default:
			reconnects++ // the hub kicked the reader for lagging
			if conn.CursorLost() {
				b.Error("resumed past the history")
			}
		}
	}
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		<-connected
		for i := range b.N {
			if _, err := th.Publish(ctx, mercure.Update{Topics: topic, ID: strconv.Itoa(i), Data: data}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	n := 0
	for ev, err := range c.Subscribe(ctx, th.endpoint(), client.Subscription{Matchers: []client.Matcher{client.Exact(topic[0])}, LastEventID: client.Earliest}) {
		if err != nil {
			b.Fatal(err)
		}
		if ev.ID != strconv.Itoa(n) {
			b.Fatalf("got %q, want %d", ev.ID, n)
		}
		if n++; n == b.N {
			break
		}
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(reconnects), "reconnects")
}
