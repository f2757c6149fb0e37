package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/storetest"
)

// A consumer that stops delivering while the servers answer (paused by
// an operator here; lost on a server that the store's connection does
// not go through, or its pull requests lost) does not stall the feed:
// the feed finds it makes no progress while the stream holds events
// after the last one it passed, and reads through a new consumer.
func TestFeedReplacesAStalledConsumer(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	s := openOn(t, dial(t, url), name, natsstore.WithTimeout(outageTimeout))
	t.Cleanup(func() { s.Close() })
	h := listenAll(t, s)
	storetest.MustAppend(t, s, storetest.NewEvent("a"))
	h.waitFor(t, "a")
	js, err := jetstream.New(dial(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	paused := 0
	for c := range st.ListConsumers(ctx).Info() {
		if _, err := js.PauseConsumer(ctx, name, c.Name, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		paused++
	}
	if paused != 1 {
		t.Fatalf("%d consumers paused, want the feed's", paused)
	}
	storetest.MustAppend(t, s, storetest.NewEvent("b"))
	h.want(t, "a", "b")
}
