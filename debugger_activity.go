package mercure

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mercurekit/mercure/internal/token"
)

// The debugger's activity view: the hub's counters sampled every second
// for five minutes, so that a page opened after the fact shows what
// happened. The page draws its chart from the samples; the hub keeps no
// more than a fixed ring of them, whoever asks.

const (
	activityEvery = time.Second
	activityKeep  = 300 // samples: five minutes
)

// activitySample is the hub's counters at one time. Counters count from
// the hub's start; the page charts their differences.
type activitySample struct {
	Seq        uint64 `json:"seq"`
	Time       int64  `json:"t"` // Unix milliseconds
	Streams    int    `json:"streams"`
	Published  uint64 `json:"published"`
	Deliveries uint64 `json:"deliveries"`
	Overflows  uint64 `json:"overflows"`
	Replays    uint64 `json:"replays"`
	// Refused counts the refused publications by status, and
	// TokenFailures the refused tokens by reason, in the order of
	// refusalStatuses and tokenReasons.
	Refused       [len(refusalStatuses)]uint64 `json:"refused"`
	TokenFailures [len(tokenReasons)]uint64    `json:"token_failures"`
}

// activityLog is the ring of the latest samples.
type activityLog struct {
	mu   sync.Mutex
	ring [activityKeep]activitySample
	n    uint64 // samples taken; the latest is ring[(n-1)%activityKeep]
}

// run samples h's counters every activityEvery until h shuts down.
func (l *activityLog) run(h *Hub) {
	t := time.NewTicker(activityEvery)
	defer t.Stop()
	for {
		l.record(h)
		select {
		case <-h.ops.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *activityLog) record(h *Hub) {
	c, ec := &h.ops.metrics, h.engine.Counters()
	s := activitySample{
		Time:       time.Now().UnixMilli(),
		Streams:    h.engine.Streams(),
		Published:  c.publishedHTTP.Load() + c.publishedGo.Load(),
		Deliveries: ec.Deliveries.Load(),
		Overflows:  ec.Overflows.Load(),
		Replays:    c.replays.Load(),
	}
	for i := range s.Refused {
		s.Refused[i] = c.refused[i].Load()
	}
	for i := range s.TokenFailures {
		s.TokenFailures[i] = c.tokenFailures[i].Load()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	s.Seq = l.n
	l.ring[(l.n-1)%activityKeep] = s
}

// after returns the samples kept whose Seq is greater than seq, oldest
// first; all of them when seq is ahead of the log (the client counted
// the samples of an earlier hub).
func (l *activityLog) after(seq uint64) []activitySample {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq > l.n {
		seq = 0
	}
	first := max(seq, l.n-min(l.n, activityKeep)) + 1
	out := make([]activitySample, 0, l.n+1-first)
	for i := first; i <= l.n; i++ {
		out = append(out, l.ring[(i-1)%activityKeep])
	}
	return out
}

// serveActivity serves the activity samples after the query's after
// parameter, to a token or session granting subscribe on the activity
// topic (see [WithDebugger]).
func (h *Hub) serveActivity(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	topic := h.activityTopic()
	p, v := h.authenticate(r, token.Subscriber)
	switch {
	case !v.serves():
	case p == nil:
		v = verdict{kind: forbid, status: http.StatusUnauthorized, detail: "the hub's activity is shown to a token or session granting subscribe on " + topic}
	case p.subscribe == nil || !slices.ContainsFunc(p.subscribe.matchers, func(m matcher) bool { return m.matches(topic) }):
		v = verdict{kind: forbid, status: http.StatusForbidden, detail: "the hub's activity is shown to a token or session granting subscribe on " + topic + "; this one does not",
			denial: denial{code: "insufficient_scope", description: p.grantHolder() + " grants no subscribe on the hub's activity topic"}}
	}
	if !v.serves() {
		h.refuse(w, r, v)
		return
	}
	after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if err != nil {
		after = 0 // absent or garbled: everything kept
	}
	b, err := json.Marshal(struct {
		Interval      int64            `json:"interval_ms"`
		RefusedLabels []string         `json:"refused_labels"`
		TokenLabels   []TokenFailure   `json:"token_failure_labels"`
		Samples       []activitySample `json:"samples"`
	}{activityEvery.Milliseconds(), refusalStatuses[:], tokenReasons[:], h.ops.debug.activity.after(after)})
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "encoding failed")
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b)
}
