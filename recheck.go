package mercure

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/token"
)

// Re-checks. The streams that the Authorizer authorized are re-checked
// by credentials, not one by one: the streams whose requests carry the
// same credentials (Host, Cookie and Authorization headers: a user's tabs
// and devices sharing a session) form a group, and one Authorizer call
// re-checks the whole group, every recheck interval from the start of the
// previous call. The calls run as they fall due, concurrently, up to
// maxRechecks at once. So a revoked session's streams end within the
// interval plus one Authorizer call, whatever the number of streams,
// while the calls due at once fit under maxRechecks: sessions × latency ÷
// interval of them on average (3 000 sessions re-checked every 2 s with
// an Authorizer answering in 200 ms keep 300 calls running).

// maxRechecks bounds the Authorizer calls that re-checks run at once,
// which protects the application's session store; past it, re-checks
// wait their turn, in order, and the bound stretches by the wait.
const maxRechecks = 1024

// rechecker holds the groups of streams re-checked together.
type rechecker struct {
	mu     sync.Mutex
	groups map[string]*sessionGroup // by credentialsKey
	slots  chan struct{}            // a slot per Authorizer call running
}

// sessionGroup is the streams authorized with the same credentials.
type sessionGroup struct {
	key string
	// req is a copy of the request of the stream that opened the group
	// (headers, URL, remote address; no body), for the Authorizer: a
	// detached stream's handler returns while the stream goes on.
	req     *http.Request
	timer   *time.Timer
	streams map[*subscriber]struct{} // under rechecker.mu, with running
	running bool                     // a re-check is under way
}

// credentialsKey is what identifies the session of r for re-checks: the
// headers an Authorizer reads a session from.
func credentialsKey(r *http.Request) string {
	var b strings.Builder
	b.WriteString(r.Host)
	for _, name := range []string{"Cookie", "Authorization"} {
		for _, v := range r.Header.Values(name) {
			b.WriteByte(0)
			b.WriteString(name)
			b.WriteByte(':')
			b.WriteString(v)
		}
	}
	return b.String()
}

// startRecheck adds s, a stream that the Authorizer authorized, to the
// group of its credentials, which is re-checked within the interval. A
// new group's first re-check comes after between half the interval and
// the interval, at random, so that the groups opened at once spread
// their calls.
func (h *Hub) startRecheck(s *subscriber, r *http.Request) {
	key := credentialsKey(r)
	rc := &h.sessions.rechecks
	rc.mu.Lock()
	defer rc.mu.Unlock()
	g := rc.groups[key]
	if g == nil {
		req := r.Clone(context.Background())
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
		g = &sessionGroup{key: key, req: req, streams: make(map[*subscriber]struct{})}
		g.timer = time.AfterFunc(h.recheckDelay(), func() { h.recheckGroup(g) })
		rc.groups[key] = g
	}
	g.streams[s] = struct{}{}
	s.group = g
}

// stopRecheck takes s, which ended, out of its group, and drops the
// group when it was the last one.
func (h *Hub) stopRecheck(s *subscriber) {
	rc := &h.sessions.rechecks
	rc.mu.Lock()
	defer rc.mu.Unlock()
	g := s.group
	if g == nil {
		return
	}
	delete(g.streams, s)
	if len(g.streams) == 0 && !g.running {
		g.timer.Stop()
		delete(rc.groups, g.key)
	}
}

// recheckDelay is when the first re-check of a new group is due: between
// half the interval and the interval, at random.
func (h *Hub) recheckDelay() time.Duration {
	d := h.cfg.recheck
	return d/2 + rand.N(d/2+1)
}

// recheckGroup asks the Authorizer again for the session of g: a revoked
// session, or one whose subscribe grants or payload changed, ends the
// group's streams cleanly (what is queued is written first); a failure
// keeps them, until the next re-check.
func (h *Hub) recheckGroup(g *sessionGroup) {
	h.ops.life.Lock()
	if h.ops.closed {
		h.ops.life.Unlock()
		return // Shutdown ends the streams
	}
	h.ops.background.Add(1) // Shutdown waits for this call
	h.ops.life.Unlock()
	defer h.ops.background.Done()
	rc := &h.sessions.rechecks
	rc.mu.Lock()
	if rc.groups[g.key] != g {
		rc.mu.Unlock()
		return // its last stream ended as the timer fired
	}
	g.running = true
	rc.mu.Unlock()

	start := time.Now()
	select {
	case rc.slots <- struct{}{}:
	case <-h.ops.ctx.Done():
		return
	}
	ctx, cancel := context.WithTimeout(h.ops.ctx, max(h.cfg.recheck, time.Second))
	p, subject, err := h.sessionPrincipal(g.req.WithContext(ctx), token.Subscriber)
	cancel()
	<-rc.slots
	if h.ops.ctx.Err() != nil {
		return
	}

	rc.mu.Lock()
	g.running = false
	streams := make([]*subscriber, 0, len(g.streams))
	for s := range g.streams {
		streams = append(streams, s)
	}
	if len(streams) == 0 {
		delete(rc.groups, g.key)
	} else {
		g.timer.Reset(max(0, h.cfg.recheck-time.Since(start)))
	}
	rc.mu.Unlock()
	h.applyRecheck(streams, p, subject, err)
}

// applyRecheck acts on what the Authorizer answered for streams.
func (h *Hub) applyRecheck(streams []*subscriber, p *principal, subject string, err error) {
	switch {
	case errors.Is(err, errInvalidAccess):
		// The rights of the session are no longer known: the streams must
		// not keep the old ones. Their reconnections get 500.
		h.log.Error("mercure: the authorizer returned an access the hub cannot use; ending the session's streams", "subject", subject, "error", err)
		endAll(streams, engine.EndGrantsChanged)
	case err != nil:
		h.sessions.authorizing.failed(h.ops.ctx, h.log, slog.LevelWarn, "mercure: the authorizer fails; streams keep their rights, requests without a token get 503 until it recovers", err)
	case p == nil:
		h.log.Debug("mercure: session revoked, ending its streams", "streams", len(streams))
		endAll(streams, engine.EndRevoked)
	default:
		h.sessions.authorizing.recovered(h.ops.ctx, h.log, "mercure: the authorizer works again")
		for _, s := range streams {
			if p.grantKey != s.principal.grantKey && !s.stream.Ending() {
				h.log.Debug("mercure: the session's grants changed, ending its stream so that it reconnects", "subject", subject)
				s.stream.End(engine.EndGrantsChanged, nil)
			}
		}
	}
}

// endAll ends streams cleanly for why.
func endAll(streams []*subscriber, why engine.EndReason) {
	for _, s := range streams {
		if !s.stream.Ending() {
			s.stream.End(why, nil)
		}
	}
}
