package mercure

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of the hub's spans.
const tracerName = "github.com/mercurekit/mercure"

// Span names, stable like the metrics' (listed in docs/operations.md,
// with their attributes).
const (
	spanPublish     = "mercure.publish"      // an HTTP publish or a Hub.Publish call
	spanStoreAppend = "mercure.store.append" // Store.Append of one update
	spanSubscribe   = "mercure.subscribe"    // a subscribe request, until its stream is open
	spanReplay      = "mercure.replay"       // the replay of a subscribe with a cursor
	spanStoreReplay = "mercure.store.replay" // Store.Replay, resolving the cursor
)

// Span attributes. Topics, ids of subscribers, tokens and data are left
// out: a span may travel to a tracing service that the application's
// users' data should not.
const (
	attrSource   = attribute.Key("mercure.publish.source") // "http" or "go"
	attrTopics   = attribute.Key("mercure.topics")         // how many topics the update has
	attrPrivate  = attribute.Key("mercure.private")
	attrUpdateID = attribute.Key("mercure.update.id")
	attrMatchers = attribute.Key("mercure.matchers") // how many matchers the stream has
	attrAnon     = attribute.Key("mercure.anonymous")
	attrReplayed = attribute.Key("mercure.replayed") // events the replay wrote
	attrStatus   = attribute.Key("http.response.status_code")
)

// WithTracerProvider sets where the hub's OpenTelemetry spans go. By
// default they go to the global provider (otel.GetTracerProvider), which
// records nothing until the application installs one. The hub traces an
// HTTP publish and a call to [Hub.Publish] (as a child of the span in the
// caller's context), the store's append under them, a subscribe request
// until its stream is open, and its replay with the store's part of it.
// A request without a span in its context continues the trace its headers
// carry, with the global propagator (otel.GetTextMapPropagator).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: WithTracerProvider(nil)", ErrInvalidOption)
		}
		c.tracerProvider = tp
		return nil
	}
}

// Start options of the publish spans, built once.
var (
	sourceGo   = trace.WithAttributes(attrSource.String("go"))
	sourceHTTP = trace.WithAttributes(attrSource.String("http"))
)

// noSpan is the span of what is not traced: it records nothing.
var noSpan trace.Span = noop.Span{}

// untracedGlobal is the global tracer provider as it is before an
// application installs one: a hub on it records nothing.
var untracedGlobal = otel.GetTracerProvider()

// tracing reports whether the hub's spans may be recorded: a provider was
// given to the hub, or one was installed globally (before or after New).
// Otherwise the hub starts no span at all, since even a span that records
// nothing costs allocations on the publish path.
func (h *Hub) tracing() bool {
	return h.cfg.tracerProvider != nil || otel.GetTracerProvider() != untracedGlobal
}

// startSpan starts a span named name under ctx, with opt if not nil, or
// returns ctx and noSpan when the hub does not trace.
func (h *Hub) startSpan(ctx context.Context, name string, opt trace.SpanStartOption) (context.Context, trace.Span) {
	switch {
	case !h.tracing():
		return ctx, noSpan
	case opt != nil:
		return h.tracer.Start(ctx, name, opt)
	}
	return h.tracer.Start(ctx, name)
}

// newTracer returns the hub's tracer.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider() // delegates to one installed later
	}
	return tp.Tracer(tracerName)
}

// requestContext returns the context of r, joined to the trace that r's
// headers carry when no span is in it yet (no middleware traced it).
func requestContext(r *http.Request) context.Context {
	ctx := r.Context()
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
}

// endSpan ends span, marking it failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// endSpanStatus ends the span of an HTTP request answered with status.
func endSpanStatus(span trace.Span, status int) {
	if span.IsRecording() {
		span.SetAttributes(attrStatus.Int(status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}

// endPublishSpan ends the span of a publish of u, which got id or failed
// with err.
func endPublishSpan(span trace.Span, u *Update, id string, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrTopics.Int(len(u.Topics)), attrPrivate.Bool(u.Private))
		if err == nil {
			span.SetAttributes(attrUpdateID.String(id))
		}
	}
	endSpan(span, err)
}

// Errors that only spans see.
var (
	errNotOpened    = errors.New("mercure: the stream did not open")
	errNoReplaySlot = errors.New("mercure: no replay slot was free")
)
