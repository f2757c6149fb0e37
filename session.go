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

// WithAuthorizer authorizes the requests that present no access token
// with the application's own session, an embedding extension to the
// protocol: the [Access] that a returns is applied as a token's grants
// would be (spec §Authorization, §Active Subscriptions). A nil Access
// makes the request anonymous; an error gets 503 (logged once until a
// succeeds again); an Access the hub cannot use gets 500. A request that
// presents a token is authorized by its token alone.
//
// A session rides in a cookie, which browsers send with cross-site
// requests too: what a authorizes must come from the hub's origin or one
// of [WithCORS], or gets 403 (spec §Security Considerations).
//
// A stream that a authorized has no expiry: the hub calls a again every
// recheck (which must be positive), once for all the streams of the same
// credentials, and ends them when the session ended ([CloseRevoked]) or
// their subscribe grants or payload changed ([CloseGrantsChanged]); their
// clients reconnect and resume. [Hub.EndStreams] ends them at once.
// docs/auth.md says how the re-checks are spread and bounded.
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
