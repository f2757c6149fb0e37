//go:build unix

package mercure_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// The activity shows every figure the issue lists, from the hub's own
// counters (issue 25 item 1): streams open, publishes, deliveries, queue
// overflows, replays, and refusals by reason, here a bad signature.
func TestDebugger_ActivityFigures(t *testing.T) {
	t.Parallel() // a second waiting for the sampler: beside the other tests
	th := startMountedHub(t, withAuthIssuer(t), mercure.WithDebugger(), mercure.WithAnonymousSubscribers(),
		mercure.WithLogger(nil),
		mercure.WithLimits(mercure.Limits{QueueEvents: 2}), mercure.WithLimits(mercure.Limits{WriteTimeout: time.Hour}), mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}),
		mercure.WithStallGrace(50*time.Millisecond)) // the stalled stream overflows once stuck that long
	reader := th.subscribe("match=x")
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: "first"}); err != nil {
		t.Fatal(err)
	}
	reader.next(t)
	replay := th.subscribe("match=x", "Last-Event-ID", store.Earliest) // one replay
	replay.next(t)
	stalledStreams(t, th, "match=x", 1) // overflows
	data := strings.Repeat("y", 64<<10)
	published := 1
	start := time.Now()
	for ; th.Metrics().Overflows == 0; published++ {
		if time.Since(start) > testwait.Deadline {
			t.Fatalf("no overflow after %d updates", published)
		}
		if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: data}); err != nil {
			t.Fatal(err)
		}
		reader.next(t) // the readers keep up: only the stalled one overflows
		replay.next(t)
	}
	status, _, _ := th.request(http.MethodGet, "match=x", "",
		"Authorization", "Bearer "+mintToken(t, authOtherKey, nil, authClaims(detail("subscribe", exactTopic("*")))))
	if status != http.StatusUnauthorized {
		t.Fatalf("a bad signature: %d", status)
	}
	tok := subToken(t, detail("subscribe", exactTopic("*")))
	var last string
	defer func() {
		if t.Failed() {
			t.Log(last)
		}
	}()
	testwait.For(t, "the activity's figures", func() bool {
		req := mustRequest(t, http.MethodGet, th.srv.URL+debugPath+"activity?after=0", "")
		req.Header.Set("Authorization", "Bearer "+tok)
		code, body, _ := do(t, req)
		var doc activityDoc
		if code != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil {
			t.Fatalf("activity: %d %s", code, body)
		}
		if len(doc.Samples) == 0 {
			return false
		}
		s := doc.Samples[len(doc.Samples)-1]
		tokens := map[string]uint64{}
		for i, l := range doc.TokenLabels {
			tokens[l] = s.Tokens[i]
		}
		last = fmt.Sprintf("published %d: sample %+v, tokens %v", published, s, tokens)
		return s.Streams >= 2 && s.Published == uint64(published) && s.Deliveries >= uint64(2*published) &&
			s.Overflows == 1 && s.Replays == 1 && tokens[string(mercure.TokenSignature)] == 1
	})
}
