package mercure_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
)

// An update larger than a stream's byte budget still reaches a stream
// that has nothing queued: refusing it would drop every stream it
// matches, and each would reconnect to replay it (a reconnect storm per
// large update).
func TestLargeUpdateReachesAnEmptyQueue(t *testing.T) {
	t.Parallel()
	const budget = 4 << 10
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxBodyBytes: budget, QueueBytes: budget}))
	streams := []*subscription{th.subscribe("match=big"), th.subscribe("match=big")}
	// Each line break costs a "data: " line: the event's encoding is
	// about six times the budget.
	data := strings.Repeat("\n", budget-512)
	goPublish(t, th, mercure.Update{Topics: []string{"big"}, Data: data})
	for i, s := range streams {
		if ev := s.next(t); ev.Data != data {
			t.Fatalf("stream %d: got %d bytes of data, want %d", i, len(ev.Data), len(data))
		}
	}
	if n := th.Metrics().Overflows; n != 0 {
		t.Fatalf("%d streams dropped", n)
	}
}

// PUB-16, PUB-19: Hub.Publish applies the size limits of the HTTP
// endpoint, with an error to inspect; HTTP answers 413.
func TestPUB19_PublishSizeLimits(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxBodyBytes: 1 << 10, MaxTopics: 2, MaxFieldBytes: 64}))
	long := strings.Repeat("x", 65)
	for name, u := range map[string]mercure.Update{
		"data":   {Topics: []string{"a"}, Data: strings.Repeat("d", 1<<10+1)},
		"topics": {Topics: []string{"a", "b", "c"}},
		"topic":  {Topics: []string{long}},
		"id":     {Topics: []string{"a"}, ID: long},
		"type":   {Topics: []string{"a"}, Type: long},
	} {
		if _, err := th.Publish(context.Background(), u); !errors.Is(err, mercure.ErrTooLarge) {
			t.Errorf("%s over its limit: %v, want ErrTooLarge", name, err)
		}
	}
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"a", "b"}, Data: strings.Repeat("d", 1<<10)}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	if status, _, _ := th.post(form("topic", "a", "data", strings.Repeat("d", 1<<10))); status != http.StatusRequestEntityTooLarge {
		t.Errorf("HTTP body over MaxBodyBytes: %d, want 413", status)
	}
}

// New checks the limits against each other: a queue that cannot hold one
// update, a pattern larger than a stream may hold or than the patterns of
// a topic may add up to.
func TestNewChecksLimitsTogether(t *testing.T) {
	t.Parallel()
	for name, l := range map[string]mercure.Limits{
		"queue under body":         {MaxBodyBytes: 2 << 20, QueueBytes: 1 << 20},
		"hub queues under a queue": {QueueBytes: 1 << 20, MaxQueuedBytes: 1 << 19},
		"pattern over stream":      {Patterns: mercure.PatternLimits{MaxSize: 10000, MaxStreamSize: 5000}},
		"anonymous over stream":    {AnonymousPatterns: mercure.PatternLimits{MaxSize: 5000}},
		"pattern over topic":       {Patterns: mercure.PatternLimits{MaxSizePerTopic: 1000}},
		"anonymous over topic":     {AnonymousPatterns: mercure.PatternLimits{MaxSizePerTopic: 500}},
		"negative pattern groups":  {Patterns: mercure.PatternLimits{MaxGroups: -1}},
		"negative patterns/topic":  {MaxPatternsPerTopic: -1},
	} {
		if _, err := mercure.New(testHubURL, mercure.WithLimits(l)); !errors.Is(err, mercure.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	// Limits left at their default follow those they must hold.
	for _, l := range []mercure.Limits{{MaxBodyBytes: 16 << 20}, {QueueBytes: 1 << 30}, {MaxBodyBytes: 1 << 30}} {
		if _, err := mercure.New(testHubURL, mercure.WithLimits(l)); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
}
