package mercure

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/rs/cors"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/token"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// authorization is who may do what: access tokens verified, the keys of
// authorization servers, the URL patterns of matchers and grants
// compiled, the CORS policy, and the grant sets interned.
type authorization struct {
	verifier *token.Verifier // nil when no issuer is configured
	patterns *index.Cache    // compiled URL patterns of matchers and grants
	// servers fetches the keys of authorization server issuers; nil when
	// there is none.
	servers *authServers
	cors    *cors.Cors // nil without WithCORS

	// mu guards the interned grant sets.
	mu        sync.Mutex
	grantSets map[string]*grantSet // interned subscribe grants of open streams

	warnedLegacy atomic.Bool // a pre-standard credential was seen without the compatibility mode
	// deniedOnce is, by token failure reason, whether one was logged at
	// Warn already (see logDenial).
	deniedOnce [len(tokenReasons)]atomic.Bool
}

// initAuth sets up the hub's authorization: its token verifier, its
// cache of compiled patterns, its CORS policy.
func (h *Hub) initAuth() error {
	h.auth.patterns = index.NewCache(h.url, h.resolver, patternCacheSize)
	h.auth.grantSets = make(map[string]*grantSet)
	var err error
	if h.auth.verifier, err = h.newVerifier(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	if h.cfg.legacy != nil {
		h.log.Warn("mercure: compatibility mode for pre-standard clients is on: tokens with the legacy mercure claim (no audience: their keys must be this hub's alone), topic= selectors and URI templates, the mercureAuthorization cookie and tokens in the authorization query parameter (keep query strings out of access logs) are accepted; see docs/migration.md to move clients to the standard")
	}
	if len(h.cfg.corsOrigins) > 0 {
		h.auth.cors = cors.New(cors.Options{
			AllowedOrigins:   h.cfg.corsOrigins,
			AllowCredentials: true,
			// HEAD is a simple method (no preflight): listed so that the
			// hub's 405 to it carries the CORS headers, which let the page
			// see the status rather than a CORS failure.
			AllowedMethods: []string{http.MethodGet, http.MethodHead, methodQuery, http.MethodPost},
			AllowedHeaders: []string{"Authorization", "Last-Event-ID", "Content-Type"},
			ExposedHeaders: []string{"Link", "Mercure-Last-Event-ID"},
			MaxAge:         600,
		})
	}
	return nil
}

// principal is what a valid access token proves about a request: the
// rights the hub acts on. A nil *principal is an anonymous client, which
// may read public updates only (AUTH-2, AUTH-36) and publish nothing.
type principal struct {
	expiry     time.Time
	details    []token.Detail  // for payload selection (AUTH-41)
	payload    json.RawMessage // a legacy token's mercure.payload, for every subscription
	publish    *grantSet
	subscribe  *grantSet
	fromCookie bool // the token came from the cookie, or a session authorized it (SEC-4)
	// session is whether the Authorizer, not a token, authorized the
	// request (WithAuthorizer): expiry is then zero, and grantKey
	// identifies the subscribe grants and payload, to notice a change.
	session  bool
	grantKey string
	// subject and sessionID are the token's sub and sid, or the Access's
	// Subject and Session: whom Hub.EndStreams selects the stream by.
	subject, sessionID string
}

// grantSet is the topic matchers of one action in a token (AUTH-30).
// Streams whose tokens grant the same matchers share one interned set, so
// that dispatch evaluates each distinct set once per update, however many
// streams hold it.
type grantSet struct {
	key      string // canonical form, for interning
	matchers []matcher
	refs     int // streams sharing the set; under hub.mu

	// The verdict for the event being dispatched; under hub.mu.
	memoEvent *engine.Event
	memo      bool
}

// unpublishable returns the index of the first of these topics that p may
// not publish to, or -1 when it may publish an update with all of them:
// it needs publish on every one (AUTH-34).
func (p *principal) unpublishable(topics []string) int {
	for i, t := range topics {
		if p == nil || p.publish == nil || !slices.ContainsFunc(p.publish.matchers, func(m matcher) bool { return m.matches(t) }) {
			return i
		}
	}
	return -1
}

// mayRead reports whether p may receive the private event e: it needs
// subscribe on at least one of its topics, canonical or alternate
// (AUTH-35). Routing plays no part (AUTH-8).
func (p *principal) mayRead(e *engine.Event, r *topicurl.Resolver) bool {
	if p == nil || p.subscribe == nil {
		return false
	}
	return p.subscribe.reads(e, r)
}

// mayReadDispatched is mayRead for dispatch, which handles one event at a
// time: the verdict is computed once per grant set, however many streams
// share it.
func (p *principal) mayReadDispatched(e *engine.Event, r *topicurl.Resolver) bool {
	if p == nil || p.subscribe == nil {
		return false
	}
	g := p.subscribe
	if g.memoEvent != e { // keyed by the event itself, not by a Seq a store could repeat
		g.memoEvent, g.memo = e, g.reads(e, r)
	}
	return g.memo
}

func (g *grantSet) reads(e *engine.Event, r *topicurl.Resolver) bool {
	return slices.ContainsFunc(g.matchers, func(m matcher) bool { return m.matchesEvent(e, r) })
}

// newVerifier builds the token verifier of the configured issuers, or nil
// when there is none, and h.auth.servers when some are authorization
// servers.
func (h *Hub) newVerifier() (*token.Verifier, error) {
	lc := h.cfg.legacy
	if len(h.cfg.issuers) == 0 && (lc == nil || lc.PublisherKeys == nil && lc.SubscriberKeys == nil) {
		return nil, nil
	}
	var legacy *token.Legacy
	if lc != nil {
		legacy = &token.Legacy{PublisherKeys: lc.PublisherKeys, SubscriberKeys: lc.SubscriberKeys, Issuers: lc.Issuers}
	}
	issuers := make([]token.Issuer, len(h.cfg.issuers))
	for i, iss := range h.cfg.issuers {
		if !iss.AuthorizationServer {
			issuers[i] = token.Issuer{ID: iss.ID, PublisherKeys: iss.PublisherKeys, SubscriberKeys: iss.SubscriberKeys}
			continue
		}
		if h.auth.servers == nil {
			as, err := newAuthServers(&h.cfg)
			if err != nil {
				return nil, err
			}
			h.auth.servers = as
		}
		src, err := h.auth.servers.add(iss.ID)
		if err != nil {
			return nil, err
		}
		issuers[i] = token.Issuer{ID: iss.ID, Keys: src}
	}
	pol := h.cfg.tokenPolicy
	var algs []jwa.SignatureAlgorithm
	for _, a := range pol.Algorithms {
		alg, _ := jwa.LookupSignatureAlgorithm(a) // checked by WithTokenPolicy
		algs = append(algs, alg)
	}
	return token.New(token.Options{
		Resource:      h.url, // AUTH-24, DIS-6: the hub URL is the resource identifier
		Issuers:       issuers,
		Algorithms:    algs,
		Leeway:        pol.Leeway,
		MaxTokenBytes: pol.MaxTokenBytes,
		MaxDetails:    pol.MaxDetails,
		MaxTopics:     pol.MaxTopics,
		MaxMatchBytes: pol.MaxMatchBytes,
		CacheSize:     pol.CacheSize,
		Legacy:        legacy,
		CheckMatcher: func(typ, value string) error {
			// Compiled once: the grants of the principal, built next,
			// find it in the cache.
			var err error
			switch typ {
			case MatchURLPattern:
				_, err = h.compilePattern(value, &h.cfg.limits.Patterns)
			case MatchURITemplate:
				_, err = h.compileTemplate(value, &h.cfg.limits.Patterns)
			}
			return err
		},
	})
}

// errMalformedCredential marks an Authorization header that is not one
// Bearer token (AUTH-16).
var errMalformedCredential = fmt.Errorf("malformed Authorization header")

// credential returns the request's token: from the Authorization header
// when there is one, and then never from the cookie (AUTH-10), else from
// the cookie (AUTH-12). Tokens in the query or a form are never read
// (AUTH-9), except, in the compatibility mode, from the authorization
// query parameter of the drafts, before the cookies, and from
// [LegacyCookieName] after the configured cookie.
func (h *Hub) credential(r *http.Request) (raw string, fromCookie bool, err error) {
	if v, ok := r.Header["Authorization"]; ok {
		if len(v) != 1 {
			return "", false, errMalformedCredential
		}
		scheme, tok, found := strings.Cut(v[0], " ")
		if !found || !strings.EqualFold(scheme, "Bearer") || tok == "" || strings.ContainsAny(tok, " \t") {
			return "", false, errMalformedCredential
		}
		return tok, false, nil
	}
	if h.cfg.legacy != nil {
		if tok := r.URL.Query().Get("authorization"); tok != "" {
			return tok, false, nil
		}
	}
	for _, name := range h.cookieNames() {
		for _, c := range r.CookiesNamed(name) {
			if c.Value != "" {
				return c.Value, true, nil
			}
		}
	}
	return "", false, nil
}

// cookieNames returns the cookies a token is read from, in order.
func (h *Hub) cookieNames() []string {
	if h.cfg.legacy != nil && h.cfg.cookieName != LegacyCookieName {
		return []string{h.cfg.cookieName, LegacyCookieName}
	}
	return []string{h.cfg.cookieName}
}

// authorizesSubscribers reports whether any stream can be authorized
// to receive private updates.
func (h *Hub) authorizesSubscribers() bool {
	return h.auth.verifier != nil || h.cfg.authorizer != nil
}

// authenticate returns the principal of the request's access token, or
// else of its session (WithAuthorizer), or nil when it presents neither.
// When ok is false it has answered the request: 400 invalid_request for a
// malformed header, 401 invalid_token for a token that fails any check,
// whatever its source; an invalid token is never taken as anonymous
// (AUTH-14), nor passed to the Authorizer.
func (h *Hub) authenticate(r *http.Request, role token.Role) (*principal, verdict) {
	if h.auth.verifier == nil {
		// No issuer: nothing to verify a token with.
		if h.cfg.authorizer != nil {
			return h.authorizeSession(r, role)
		}
		return nil, verdict{}
	}
	raw, fromCookie, err := h.credential(r)
	switch {
	case err != nil:
		return nil, denied(denial{status: http.StatusBadRequest, code: "invalid_request", reason: TokenMalformed,
			description: "the Authorization header must be one Bearer token: Authorization: Bearer <token>"}, role, err)
	case raw == "" && h.cfg.authorizer != nil:
		return h.authorizeSession(r, role)
	case raw == "":
		if hint := h.ignoredLegacyCredential(r); hint != "" {
			// The request is served as anonymous, or refused for want of
			// a token: either way, say why once.
			level := slog.LevelDebug
			if !h.auth.warnedLegacy.Load() && h.auth.warnedLegacy.CompareAndSwap(false, true) {
				level = slog.LevelWarn
			}
			h.log.Log(r.Context(), level, "mercure: a client sent a pre-standard credential, ignored: "+hint)
		}
		return nil, verdict{}
	}
	tok, err := h.auth.verifier.VerifyContext(r.Context(), raw, role)
	if err != nil && token.Hint(err) == token.HintKeysUnavailable {
		// The issuer's keys could not be fetched yet: an outage of the
		// authorization server, not a fault of the token. A temporary
		// refusal, which an EventSource retries (see Hub.unavailable).
		d := h.tokenDenial(err)
		h.ops.metrics.tokenFailure(d.reason)
		h.logDenial(r.Context(), d, role, err)
		return nil, unavailableFor(http.StatusServiceUnavailable, d.description)
	}
	if err != nil {
		// The cause goes to the client in fixed words (see refusal.go);
		// the error names the failed check, never the token (SEC-9).
		return nil, denied(h.tokenDenial(err), role, err)
	}
	return h.newPrincipal(tok, role, fromCookie), verdict{}
}

// newPrincipal turns a verified token into the rights of one request.
func (h *Hub) newPrincipal(tok *token.Token, role token.Role, fromCookie bool) *principal {
	p := &principal{expiry: tok.Expiry, details: tok.Details, payload: tok.Payload, fromCookie: fromCookie,
		subject: tok.Subject, sessionID: tok.Session}
	h.grant(p, tok.Details, role)
	return p
}

// grant gives p the grant sets of details for role: those of a verified
// token, or of an Access.
func (h *Hub) grant(p *principal, details []token.Detail, role token.Role) {
	var pub, sub []matcher
	for _, d := range details {
		for _, tm := range d.Topics {
			m, err := h.grantMatcher(tm)
			if err != nil {
				continue // compiled when the token or Access was checked
			}
			if d.Publish {
				pub = append(pub, m)
			}
			if d.Subscribe {
				sub = append(sub, m)
			}
		}
	}
	if role == token.Publisher && len(pub) > 0 {
		p.publish = newGrantSet(pub)
	}
	if role == token.Subscriber && len(sub) > 0 {
		p.subscribe = newGrantSet(sub)
	}
}

// grantMatcher builds the matcher of a grant: "*" matches every topic
// whatever the type says (AUTH-40).
func (h *Hub) grantMatcher(tm token.Matcher) (matcher, error) {
	switch {
	case tm.MatchesAll():
		return matcher{kind: index.Wildcard, typ: tm.Type, value: tm.Match}, nil
	case tm.Type == MatchURLPattern:
		pat, err := h.compilePattern(tm.Match, &h.cfg.limits.Patterns)
		if err != nil {
			return matcher{}, err
		}
		return matcher{kind: index.URLPattern, typ: tm.Type, value: tm.Match, pattern: pat}, nil
	case tm.Type == MatchURITemplate: // a legacy token's selector
		pat, err := h.compileTemplate(tm.Match, &h.cfg.limits.Patterns)
		if err != nil {
			return matcher{}, err
		}
		return matcher{kind: index.URITemplate, typ: tm.Type, value: tm.Match, pattern: pat}, nil
	default:
		return matcher{kind: index.Exact, typ: MatchExact, value: tm.Match}, nil
	}
}

// newGrantSet builds a grant set and its interning key. The key must be
// one-to-one: two sets with equal keys are shared by their streams, so
// each field is length-prefixed (values are arbitrary strings from
// tokens) and the kind, not the token's type string, is encoded.
func newGrantSet(ms []matcher) *grantSet {
	var b []byte
	for _, m := range ms {
		b = append(b, byte(m.kind))
		b = strconv.AppendInt(b, int64(len(m.value)), 10)
		b = append(b, ':')
		b = append(b, m.value...)
	}
	return &grantSet{key: string(b), matchers: ms}
}

// sameGrants reports whether two grant sets hold the same matchers.
func sameGrants(a, b *grantSet) bool {
	return slices.EqualFunc(a.matchers, b.matchers, func(x, y matcher) bool { return x.kind == y.kind && x.value == y.value })
}

// sameOrigin reports whether a request authenticated by a cookie or a
// session comes from the hub's own origin or a CORS-allowed one (SEC-4),
// as far as the request tells: its Origin header must name one; without
// one (a same-origin GET, an EventSource among them, carries none),
// Sec-Fetch-Site must say same-origin (or none: the user opened it
// directly), or else the Referer must name one.
//
// A request that tells nothing (none of those headers) is refused when
// it publishes (anyOrigin false): the spec's cookie mechanism asks the
// hub to reject cookie-authenticated publishes that carry neither Origin
// nor Referer. A subscription that tells nothing is served: a browser
// always sends Origin on a cross-origin EventSource, a CORS-mode
// request, so what opens a stream from another site names it (Origin,
// or Sec-Fetch-Site cross-site or same-site), and a stream without any
// comes from a client that is not a browser (with a cookie jar) or a
// same-origin page whose referrer policy strips the Referer in a browser
// that sends no Fetch Metadata.
func (h *Hub) sameOrigin(r *http.Request, anyOrigin bool) bool {
	if o := r.Header.Get("Origin"); o != "" {
		return h.allowedOrigin(o)
	}
	site := r.Header.Get("Sec-Fetch-Site")
	switch site {
	case "same-origin", "none":
		return true
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		return h.allowedOrigin(ref)
	}
	return anyOrigin && site == ""
}

// allowedOrigin reports whether the URL source (an Origin or a Referer)
// is of the hub's origin or a CORS-allowed one.
func (h *Hub) allowedOrigin(source string) bool {
	u, err := url.Parse(source)
	if err != nil || u.Host == "" {
		return false
	}
	o := origin(u)
	return o == origin(h.cfg.url) || slices.Contains(h.cfg.corsOrigins, o)
}

// origin serializes u's origin: lowercase scheme and host, default port
// dropped, as browsers send it.
func origin(u *url.URL) string {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}
