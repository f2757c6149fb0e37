package redisstore

import (
	"testing"
	"time"
)

// After an outage the feed tries again at most a second apart: until it
// is back the hub refuses to publish (issue 23 item 4: a backoff that
// reached 5 s kept publishing refused, or acknowledged with nothing
// delivered, for seconds after the server was back).
func TestFeedBackoffIsShort(t *testing.T) {
	d := minBackoff
	for range 20 { // a long outage
		d = nextBackoff(d)
		if d > time.Second {
			t.Fatalf("the feed waits %v between two attempts, more than 1 s", d)
		}
	}
	if d != maxBackoff {
		t.Fatalf("after 20 failures the feed waits %v, want %v", d, maxBackoff)
	}
}
