package mercure_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// tracedHub is a test hub whose spans an SDK provider records.
func tracedHub(t *testing.T, opts ...mercure.Option) (*testHub, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	th := newTestHub(t, append([]mercure.Option{mercure.WithTracerProvider(tp)}, opts...)...)
	return th, rec, tp.Tracer("app")
}

// ended returns the ended spans named name.
func ended(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the single ended span named name.
func one(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := ended(rec, name)
	if len(spans) != 1 {
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name())
		}
		t.Fatalf("%d ended spans named %s, want 1; ended: %q", len(spans), name, names)
	}
	return spans[0]
}

// attr returns the value of span's attribute key, or an invalid value.
func attr(span sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range span.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// childOf fails unless child's parent is parent.
func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("span %s is not a child of %s", child.Name(), parent.Name())
	}
}

// Hub.Publish's span is a child of the caller's span, so that the
// application's request trace shows its publish, and the store's append
// is a child of it; the attributes describe the update without its topics.
func TestTracing_GoPublishIsAChildOfTheCallersSpan(t *testing.T) {
	t.Parallel()
	th, rec, app := tracedHub(t)
	ctx, appSpan := app.Start(context.Background(), "app.request")
	id, err := th.Publish(ctx, mercure.Update{Topics: []string{pubTopic, "urn:alt"}, Data: "x"})
	appSpan.End()
	if err != nil {
		t.Fatal(err)
	}
	parent := one(t, rec, "app.request")
	pub := one(t, rec, "mercure.publish")
	childOf(t, pub, parent)
	childOf(t, one(t, rec, "mercure.store.append"), pub)
	if attr(pub, "mercure.publish.source").AsString() != "go" || attr(pub, "mercure.topics").AsInt64() != 2 ||
		attr(pub, "mercure.update.id").AsString() != id || attr(pub, "mercure.private").AsBool() {
		t.Fatalf("publish span attributes %v", pub.Attributes())
	}
	for _, kv := range pub.Attributes() {
		if strings.Contains(fmt.Sprint(kv.Value.AsInterface()), pubTopic) {
			t.Fatalf("a topic in the span's attributes: %v", kv)
		}
	}
}

// An HTTP publish continues the trace its traceparent header names (with
// the application's propagator), and a refused one records its status.
func TestTracing_HTTPPublishContinuesTheRequestTrace(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	th, rec, _ := tracedHub(t)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req := th.newRequest(context.Background(), http.MethodPost, "", "topic=urn%3Aa&data=x",
		"Content-Type", "application/x-www-form-urlencoded",
		"Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if status, body, _ := do(t, req); status != http.StatusOK {
		t.Fatalf("publish: %d %s", status, body)
	}
	pub := one(t, rec, "mercure.publish")
	if got := pub.SpanContext().TraceID().String(); got != traceID || pub.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("publish span in trace %s under %s, want the header's", got, pub.Parent().SpanID())
	}
	if attr(pub, "mercure.publish.source").AsString() != "http" || attr(pub, "http.response.status_code").AsInt64() != 200 {
		t.Fatalf("publish span attributes %v", pub.Attributes())
	}
	childOf(t, one(t, rec, "mercure.store.append"), pub)

	rec.Reset()
	if status, _, _ := th.post("topic=*"); status != http.StatusBadRequest {
		t.Fatalf("publish of *: %d", status)
	}
	if got := attr(one(t, rec, "mercure.publish"), "http.response.status_code").AsInt64(); got != 400 {
		t.Fatalf("refused publish span status %d, want 400", got)
	}
	if n := len(ended(rec, "mercure.store.append")); n != 0 {
		t.Fatalf("%d appends for a refused publish", n)
	}
}

// A subscribe's span ends when its stream is open, not with the stream;
// its replay and the store's part of it are its children, and a store
// failure marks the span of the publish that met it.
func TestTracing_SubscribeAndReplay(t *testing.T) {
	t.Parallel()
	th, rec, _ := tracedHub(t)
	th.mustPost("topic=urn%3Aa&data=1")
	th.mustPost("topic=urn%3Aa&data=2")
	rec.Reset()

	s := th.subscribe("match=urn%3Aa&last_event_id=earliest")
	expectData(t, s, "1")
	expectData(t, s, "2")
	testwait.For(t, "the subscribe span ends while the stream is open", func() bool {
		return len(ended(rec, "mercure.subscribe")) == 1
	})
	sub := one(t, rec, "mercure.subscribe")
	replay := one(t, rec, "mercure.replay")
	childOf(t, replay, sub)
	childOf(t, one(t, rec, "mercure.store.replay"), replay)
	if attr(sub, "mercure.matchers").AsInt64() != 1 || attr(replay, "mercure.replayed").AsInt64() != 2 {
		t.Fatalf("attributes: subscribe %v, replay %v", sub.Attributes(), replay.Attributes())
	}
	if sub.Status().Code == codes.Error || replay.Status().Code == codes.Error {
		t.Fatalf("an open stream's spans marked failed: %v, %v", sub.Status(), replay.Status())
	}
	s.close()

	rec.Reset()
	_, res := th.trySubscribe(http.MethodGet, "match_regex=x", "")
	res.Body.Close()
	if got := attr(one(t, rec, "mercure.subscribe"), "http.response.status_code").AsInt64(); got != 400 {
		t.Fatalf("refused subscribe span status %d, want 400", got)
	}

	// Refused for now, an EventSource is told to retry with a 200; the
	// span still says 503, a failure.
	rec.Reset()
	if err := th.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, res = th.trySubscribe(http.MethodGet, "match=urn%3Aa", "", "Accept", "text/event-stream")
	res.Body.Close()
	if sub := one(t, rec, "mercure.subscribe"); res.StatusCode != http.StatusOK ||
		attr(sub, "http.response.status_code").AsInt64() != 503 || sub.Status().Code != codes.Error {
		t.Fatalf("deferred refusal: %d, span status %d %v; want 200, and 503 marked failed", res.StatusCode, attr(sub, "http.response.status_code").AsInt64(), sub.Status())
	}
}

// Log records carry the trace and span ids of the request that led to
// them, whatever the application's handler; and a store outage is logged
// once when it starts and once when it ends, however many publishes
// meet it.
func TestTracing_LogsCarryTheTraceOncePerTransition(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, nil))
	errDown := errors.New("store down")
	th, _, app := tracedHub(t, mercure.WithLogger(log), mercure.WithStore(failingStore{newMemoryStore(t, 10), errDown}))

	ctx, span := app.Start(context.Background(), "app.request")
	for range 3 {
		if _, err := th.Publish(ctx, mercure.Update{Topics: []string{"urn:a"}, Data: "fail"}); !errors.Is(err, errDown) {
			t.Fatalf("Publish: %v", err)
		}
	}
	span.End()
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"urn:a"}, Data: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"urn:a"}, Data: "ok"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	logged := buf.String()
	mu.Unlock()
	traceID := span.SpanContext().TraceID().String()
	if logLines(logged, "level=ERROR", "store refuses updates", "trace_id="+traceID) != 1 {
		t.Fatalf("want one error line with trace_id=%s for three failed publishes:\n%s", traceID, logged)
	}
	if logLines(logged, "level=INFO", "records updates again") != 1 || logLines(logged, "store down") != 1 {
		t.Fatalf("want one recovery line and the error once:\n%s", logged)
	}
}
