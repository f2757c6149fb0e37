package mercure

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/mercurekit/mercure/internal/chars"
	"github.com/mercurekit/mercure/internal/token"
)

// sessions is what the hub knows of the users behind its streams: the
// streams an Authorizer authorized, re-checked at an interval
// (recheck.go), and every stream by subject and session, for EndStreams
// (endstreams.go). Each has its lock.
type sessions struct {
	rechecks    rechecker  // the Authorizer's re-checks of streams
	owners      owners     // the streams by subject and session, for EndStreams
	authorizing transition // the application's Authorizer failing
}

func (s *sessions) init() {
	s.rechecks = rechecker{groups: make(map[string]*sessionGroup), slots: make(chan struct{}, maxRechecks)}
	s.owners = owners{streams: make(map[streamSelector]map[*subscriber]struct{})}
}

// Access is what the application grants the user behind a request, from
// its own session: the rights an access token's authorization_details
// would carry (spec §Authorization: Authorization Details), with the
// same meaning. See [WithAuthorizer].
type Access struct {
	// Subject names the user in the hub's logs, as a token's sub would,
	// and selects the user's streams for [Hub.EndStreams].
	Subject string
	// Session identifies the user's session, for [Hub.EndStreams] to end
	// its streams alone (at a logout, say): any value the application
	// keeps for the session, its id or a hash of it. It never leaves the
	// process in clear.
	Session string
	// Publish lists the topics the user may publish to over HTTP: an
	// update needs publish on every one of its topics (spec
	// §Authorization: Publishers).
	Publish []Match
	// Subscribe lists the topics whose private updates the user may
	// receive: one of an update's topics is enough (spec §Authorization:
	// Subscribers). It also authorizes the subscriptions web API.
	Subscribe []Match
	// Payload, when not nil, must marshal to a JSON object. As a token's
	// payload does, it goes with the subscribe grant: into the events and
	// API documents of the user's subscriptions whose own matcher, taken
	// as a topic, one of Subscribe selects (spec §Authorization:
	// Payloads). A subscription to a topic outside them (a public one) or
	// to * has none. Other subscribers may see it: put nothing private in
	// it.
	Payload any
}

// An Authorizer returns the access of the user behind r, found with the
// application's own session logic (its session cookie, say); nil and no
// error when r has no session. An error says that it could not tell (its
// session store is down): see [WithAuthorizer] for what the hub then
// does. The hub may call it concurrently, and, to re-check the streams
// of a session, with a copy of one of their requests (headers, URL,
// remote address; no body) after its handler has returned; the copy's
// context ends at shutdown.
type Authorizer func(r *http.Request) (*Access, error)

// errInvalidAccess is wrapped by the error the hub logs when an
// [Authorizer] returns an [Access] it cannot use: a match that is empty,
// of an unknown type, not valid UTF-8 text, longer or more numerous than
// [Limits] allow, a URL pattern that does not compile within
// [Limits].Patterns, or a payload that is not a JSON object.
var errInvalidAccess = errors.New("mercure: invalid access")

// WithAuthorizer authorizes requests that present no access token with
// the application's own session: an embedding extension to the protocol,
// not part of the Mercure specification, for an application that serves
// its hub itself and need not mint tokens for it. The Access that a
// returns is applied as a token's grants would be: private updates, the
// publish endpoint, the subscriptions web API and subscription payloads
// follow the same rules (spec §Authorization, §Active Subscriptions).
//
// A request that presents a token (an Authorization header, or the
// cookie of [WithCookieName]) is authorized by its token alone, when the
// hub has an [Issuer]: an invalid token is refused, never passed to a. A
// request without one goes to a: a nil Access makes it anonymous, refused
// unless [WithAnonymousSubscribers] is given (a publish always is); an
// error gets 503 (and is logged once until a succeeds again); an Access
// the hub cannot use gets 500 (and is logged, wrapping
// [errInvalidAccess]). A request refused for want of both a token and a
// session counts in [Metrics].TokenFailures as "missing".
//
// A session usually rides in a cookie, which browsers send with
// cross-site requests too: a publish or a subscription authorized by a
// must come from the hub's origin or one given to [WithCORS], as one
// with the token cookie must (spec §Security Considerations): its Origin
// header names it, or, on a same-origin EventSource, which sends none,
// Sec-Fetch-Site says same-origin (or else its Referer names it); any
// other gets 403. Servers publish with [Hub.Publish], or with a token.
//
// A stream authorized by a has no expiry: instead the hub calls a again
// for it every recheck. One call re-checks every stream whose request
// carries the same credentials (its Host, Cookie and Authorization
// headers), with a copy of one of their requests: the Access must
// depend on the session they carry, not on the request's URL or remote
// address. The first re-check of new credentials comes after between
// half of recheck and recheck, at random, so that sessions opened
// together are not re-checked together; the next ones every recheck
// from the start of the previous call. When a returns nil the streams
// end ([CloseRevoked]); when the subscribe grants or the payload changed,
// they end so that their clients reconnect with their new rights
// ([CloseGrantsChanged]); EventSource reconnects by itself and resumes
// with Last-Event-ID, missing nothing. When a fails, the streams go on
// with the rights they have, and a is asked again after the next
// interval.
//
// So a revoked session's streams end within recheck plus the time a
// takes to answer, however many streams there are, while the calls due
// at once stay under 1024 (the most the hub runs at once, to spare the
// application's session store; past it, re-checks wait their turn and
// the bound stretches by the wait): on average, distinct sessions ×
// a's latency ÷ recheck calls run at once, 300 for 3 000 sessions with a
// 200 ms Authorizer and a 2 s interval. To end a session's streams at
// once (a logout, a role change), call [Hub.EndStreams]. recheck must
// be positive.
func WithAuthorizer(a Authorizer, recheck time.Duration) Option {
	return func(c *config) error {
		if a == nil {
			return fmt.Errorf("%w: nil Authorizer", ErrInvalidOption)
		}
		if recheck <= 0 {
			return fmt.Errorf("%w: authorizer re-check interval %v", ErrInvalidOption, recheck)
		}
		c.authorizer, c.recheck = a, recheck
		return nil
	}
}

// callAuthorizer calls the application's authorizer, turning its panic
// into an error: a re-check runs on a goroutine of the hub's.
func (h *Hub) callAuthorizer(r *http.Request) (a *Access, err error) {
	defer func() {
		if v := recover(); v != nil {
			a, err = nil, fmt.Errorf("the authorizer panicked: %v", v)
		}
	}()
	return h.cfg.authorizer(r)
}

// sessionPrincipal returns the principal of r's session for role, nil
// when it has none. An error wraps errInvalidAccess when the authorizer
// returned an access the hub cannot use.
func (h *Hub) sessionPrincipal(r *http.Request, role token.Role) (*principal, string, error) {
	a, err := h.callAuthorizer(r)
	if err != nil || a == nil {
		return nil, "", err
	}
	details, err := h.accessDetails(a)
	if err != nil {
		return nil, a.Subject, err
	}
	// fromCookie: a session is ambient, as a cookie is (SEC-4).
	p := &principal{details: details, fromCookie: true, session: true, subject: a.Subject, sessionID: a.Session}
	h.grant(p, details, role)
	p.grantKey = "-"
	if p.subscribe != nil {
		p.grantKey = p.subscribe.key
	}
	for _, d := range details {
		if d.Subscribe {
			p.grantKey += "\x00" + string(d.Payload)
		}
	}
	return p, a.Subject, nil
}

// accessDetails checks an Access as a token's grants are checked, and
// turns it into authorization details: one per action, the payload with
// subscribe.
func (h *Hub) accessDetails(a *Access) ([]token.Detail, error) {
	var details []token.Detail
	convert := func(action string, ms []Match) ([]token.Matcher, error) {
		if len(ms) > h.cfg.limits.MaxMatchers {
			return nil, fmt.Errorf("%w: more than %d %s matches", errInvalidAccess, h.cfg.limits.MaxMatchers, action)
		}
		out := make([]token.Matcher, len(ms))
		for i, m := range ms {
			typ := m.Type
			if typ == "" {
				typ = MatchExact
			}
			switch {
			case typ != MatchExact && typ != MatchURLPattern:
				return nil, fmt.Errorf("%w: unsupported match type %q", errInvalidAccess, m.Type)
			case m.Pattern == "" || !chars.Valid(m.Pattern):
				return nil, fmt.Errorf("%w: invalid %s match %q", errInvalidAccess, action, m.Pattern)
			case len(m.Pattern) > h.cfg.limits.MaxMatcherBytes:
				return nil, fmt.Errorf("%w: a %s match of %d bytes, more than %d", errInvalidAccess, action, len(m.Pattern), h.cfg.limits.MaxMatcherBytes)
			}
			out[i] = token.Matcher{Type: typ, Match: m.Pattern}
			// Compiled here, within the limits of token grants; the
			// principal built next finds it in the cache.
			if _, err := h.grantMatcher(out[i]); err != nil {
				return nil, fmt.Errorf("%w: %s URL pattern %q: %w", errInvalidAccess, action, m.Pattern, err)
			}
		}
		return out, nil
	}
	if len(a.Publish) > 0 {
		ms, err := convert("publish", a.Publish)
		if err != nil {
			return nil, err
		}
		details = append(details, token.Detail{Publish: true, Topics: ms})
	}
	if len(a.Subscribe) > 0 {
		ms, err := convert("subscribe", a.Subscribe)
		if err != nil {
			return nil, err
		}
		d := token.Detail{Subscribe: true, Topics: ms}
		if a.Payload != nil {
			b, err := json.Marshal(a.Payload)
			if err != nil || len(b) == 0 || b[0] != '{' {
				return nil, fmt.Errorf("%w: the payload must marshal to a JSON object", errInvalidAccess)
			}
			d.Payload = b
		}
		details = append(details, d)
	}
	return details, nil
}

// authorizeSession authorizes r, which presents no token, with the
// application's authorizer. When ok is false it has answered the
// request: 503 when the authorizer failed (for an EventSource, a stream
// that retries: see Hub.unavailable), 500 when its access cannot be
// used.
func (h *Hub) authorizeSession(r *http.Request, role token.Role) (*principal, verdict) {
	p, subject, err := h.sessionPrincipal(r, role)
	switch {
	case errors.Is(err, errInvalidAccess):
		h.log.ErrorContext(r.Context(), "mercure: the authorizer returned an access the hub cannot use", "subject", subject, "error", err)
		return nil, verdict{kind: problem, status: http.StatusInternalServerError, detail: "the application's authorization failed"}
	case err != nil:
		h.sessions.authorizing.failed(r.Context(), h.log, slog.LevelWarn, "mercure: the authorizer fails; requests without a token get 503 until it recovers", err)
		return nil, unavailableFor(http.StatusServiceUnavailable, "authorization is unavailable")
	}
	h.sessions.authorizing.recovered(r.Context(), h.log, "mercure: the authorizer works again")
	return p, verdict{}
}
