package mercure_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
)

// A publisher that got no answer sends its update again: with the id it
// chose, the hub answers as it did the first time (200, the same id) and
// records and delivers the update once (see Store.Append).
func TestRetriedPublishIsRecordedOnce(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	topic := url.QueryEscape(bookTopic)
	s := th.subscribe("match=" + topic)
	body := "topic=" + topic + "&id=order-42&data=paid&type=status&retry=500"
	for i := range 3 {
		if id := th.mustPost(body); id != "order-42" {
			t.Fatalf("POST %d answered %q, want order-42", i, id)
		}
	}
	u := mercure.Update{Topics: []string{bookTopic}, ID: "order-42", Data: "paid", Type: "status", Retry: ptr(500 * time.Millisecond)}
	if id, err := th.Publish(context.Background(), u); err != nil || id != "order-42" {
		t.Fatalf("Publish of the same update: %q, %v; want order-42", id, err)
	}
	th.publishIDs(bookTopic, "end")
	if got := strings.Join(s.ids(t, 2), " "); got != "order-42 end" {
		t.Fatalf("subscriber got %s, want the update once, then end", got)
	}
	replayed := th.subscribe("match="+topic, "Last-Event-ID", store.Earliest)
	if got := strings.Join(replayed.ids(t, 2), " "); got != "order-42 end" {
		t.Fatalf("history holds %s, want the update once", got)
	}
}

// Without an id of the publisher's, each publish is a new update: the hub
// cannot tell a retry from a second update with the same content.
func TestPublishWithoutIDIsNeverARetry(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	topic := url.QueryEscape(bookTopic)
	s := th.subscribe("match=" + topic)
	first := th.mustPost("topic=" + topic + "&data=same")
	second := th.mustPost("topic=" + topic + "&data=same")
	if first == second {
		t.Fatalf("two publishes without id got the same id %q", first)
	}
	if got := strings.Join(s.ids(t, 2), " "); got != first+" "+second {
		t.Fatalf("subscriber got %s, want both", got)
	}
}
