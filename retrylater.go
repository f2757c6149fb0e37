package mercure

// A browser's EventSource gives up for good on any answer but 200 with
// text/event-stream (HTML § The EventSource interface: "fail the
// connection"), and only reconnects after a stream that ends. A refusal
// that says "not now" (429, 503: the store or the authorizer down, a
// budget spent, the hub shutting down) would end a page's updates for
// good over an outage of seconds. So the subscribe endpoint negotiates:
// a client that prefers an event stream to a problem document (an
// EventSource sends Accept: text/event-stream and nothing else) gets,
// for such a refusal, a stream that holds a comment with the status and
// the reason, a retry field with the delay Retry-After would say
// (jittered) and no event nor id, and ends: the browser reconnects then,
// with its last event id unchanged, so the resume is exact. Scripts
// (curl sends */*, or no Accept) and the Go client, which ranks
// application/problem+json as high as text/event-stream, still get the
// status, Retry-After and the problem document. Refusals that retrying
// cannot cure (400, 401, 403, 404...) are answered as before to every
// client: an EventSource must stop on them.
//
// The drain (see [Limits].Drain) answers every subscribe with the same kind
// of stream, without the comment: it is a hand-off, not a failure.

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mercurekit/mercure/internal/engine"
)

// temporary reports whether status is a refusal that passes: 429 (a
// budget that frees up as streams end) or 503 (an outage, a shutdown).
func temporary(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// retryDelay is the delay a client refused with status is told to wait:
// that of its Retry-After (see writeProblem).
func retryDelay(status int) time.Duration {
	if s, err := strconv.Atoi(retryAfter[status]); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 2 * time.Second
}

// unavailable answers r, refused for now with status and detail: with a
// problem document and Retry-After, or, when r is a subscribe request
// whose client prefers an event stream (see prefersEventStream), with a
// stream that tells it when to come back and ends. A status that is not
// temporary always gets the problem document.
func (h *Hub) unavailable(w http.ResponseWriter, r *http.Request, status int, detail string) {
	if rw, ok := w.(*refusalWriter); ok && rw.subscribe && temporary(status) && prefersEventStream(r) {
		h.ops.metrics.subscribesDeferred.Add(1)
		rw.status = status // for the span: a refusal, whatever the client is told
		// As refusals of tokens are (see logDenial): the first at Warn, so
		// that a budget too small shows at once, the next at Debug, so
		// that no client floods the log. An outage of the store or the
		// authorizer is logged at Warn on its own, once.
		level, attrs := slog.LevelDebug, []any{"status", status, "reason", detail}
		if !h.ops.deferredOnce.Load() && h.ops.deferredOnce.CompareAndSwap(false, true) {
			level, attrs = slog.LevelWarn, append(attrs, "note", "first deferred refusal: the next ones are logged at Debug, and counted in Metrics.SubscribesDeferred")
		}
		h.log.Log(r.Context(), level, "mercure: a subscribe refused for now, answered with a stream that tells the client to retry (it reads an event stream)", attrs...)
		retryStream(w, strconv.Itoa(status)+" "+detail, retryDelay(status))
		return
	}
	writeProblem(w, status, detail)
}

// retryStream answers with an event stream that only sets the client's
// reconnection delay to about delay (see [engine.RetryFieldAfter]) and
// ends, with comment, if any, on a comment line first (which an
// EventSource ignores; a person reading the stream sees why). It holds
// no id: the client's last event id stays as it was.
func retryStream(w http.ResponseWriter, comment string, delay time.Duration) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Del("Mercure-Last-Event-ID")
	w.WriteHeader(http.StatusOK)
	var b []byte
	if comment != "" {
		comment = strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, comment)
		b = append(append(append(b, ": "...), comment...), '\n')
	}
	w.Write(append(b, engine.RetryFieldAfter(delay)...))
}

// Media types a client may read a refusal as.
var (
	eventStream = mediaType{"text", "event-stream"}
	problemJSON = mediaType{"application", "problem+json"}
	plainJSON   = mediaType{"application", "json"}
)

type mediaType struct{ typ, sub string }

// prefersEventStream reports whether r's Accept ranks text/event-stream
// above both application/problem+json and application/json (RFC 9110
// section 12.5.1: each type takes the quality of the most specific range
// that matches it). No Accept, or */*, ranks them all alike: false.
func prefersEventStream(r *http.Request) bool {
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return false
	}
	stream := quality(accept, eventStream)
	return stream > 0 && stream > quality(accept, problemJSON) && stream > quality(accept, plainJSON)
}

// quality returns the quality, in thousandths, that the Accept field
// values accept give to t: that of the most specific range matching t,
// 0 when none does.
func quality(accept []string, t mediaType) int {
	q, rank := 0, -1 // rank: 0 for */*, 1 for type/*, 2 for type/subtype
	for _, v := range accept {
		for rng := range strings.SplitSeq(v, ",") {
			params := strings.Split(rng, ";")
			typ, sub, ok := strings.Cut(strings.TrimSpace(params[0]), "/")
			if !ok {
				continue
			}
			var rk int
			switch {
			case typ == "*" && sub == "*":
				rk = 0
			case strings.EqualFold(typ, t.typ) && sub == "*":
				rk = 1
			case strings.EqualFold(typ, t.typ) && strings.EqualFold(sub, t.sub):
				rk = 2
			default:
				continue
			}
			if rk <= rank {
				continue // a range as specific came first
			}
			rq, ok := qvalue(params[1:])
			if !ok {
				continue
			}
			q, rank = rq, rk
		}
	}
	return q
}

// qvalue reads the weight among a media range's parameters, in
// thousandths (RFC 9110 section 12.4.2): 1000 without one; ok is false
// when it is malformed.
func qvalue(params []string) (q int, ok bool) {
	for _, p := range params {
		name, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		v = strings.TrimSpace(v)
		whole, frac, _ := strings.Cut(v, ".")
		if (whole != "0" && whole != "1") || len(frac) > 3 || strings.Trim(frac, "0123456789") != "" {
			return 0, false
		}
		q = 1000 * int(whole[0]-'0')
		for i, m := 0, 100; i < len(frac); i, m = i+1, m/10 {
			q += int(frac[i]-'0') * m
		}
		return min(q, 1000), true
	}
	return 1000, true
}
