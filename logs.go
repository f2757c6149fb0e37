package mercure

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
)

// The hub's logging policy: a healthy hub is quiet; a sick one says why
// once per transition (failing, then recovered), at Warn or Error, and
// repeats only at Debug. What one client does (leaving, falling behind,
// presenting a bad token) is counted in [Metrics] and logged at Debug at
// most. No record holds a token, a cookie or an update's data.

// traceHandler adds the trace and span ids of the record's context to
// every log record, so that a log line leads to its trace whatever the
// application's handler.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

// transition logs a condition of the hub once when it begins and once
// when it ends, however many requests meet it meanwhile.
type transition struct{ failing atomic.Bool }

// failed reports one occurrence of the condition: at level the first
// time, at Debug until it is recovered.
func (t *transition) failed(ctx context.Context, log *slog.Logger, level slog.Level, msg string, err error) {
	if !t.failing.Load() && t.failing.CompareAndSwap(false, true) {
		log.Log(ctx, level, msg, "error", err)
		return
	}
	log.Log(ctx, slog.LevelDebug, msg, "error", err)
}

// recovered reports that the condition is over, once.
func (t *transition) recovered(ctx context.Context, log *slog.Logger, msg string) {
	if t.failing.Load() && t.failing.CompareAndSwap(true, false) {
		log.InfoContext(ctx, msg)
	}
}
