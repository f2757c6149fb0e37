package mercure

import (
	"net/http"
	"time"

	"github.com/mercurekit/mercure/internal/token"
)

// Admission. Every request the hub serves is decided on in one place:
// its credential (a token, or the application's session) gives a
// principal, the hub's rules about that principal give one verdict, and
// the handler writes the verdict once (Hub.refuse) or serves. The kinds
// of refusal differ in what a client is told: a refused credential gets
// a challenge (refusal.go), a refusal that passes gets what an
// EventSource retries (retrylater.go), a drain gets its hand-off stream
// (drain.go), the rest a problem document.

// A verdict is what the hub decides on a request: serve it (the zero
// value), or refuse it.
type verdict struct {
	kind   verdictKind
	status int    // the refusal's
	detail string // the problem document's; the reason of a retryLater
	denial denial // kind deny: the refused credential
	role   token.Role
	err    error // kind deny: the verification error, for the log
}

type verdictKind uint8

const (
	serve      verdictKind = iota
	deny                   // a credential refused: a challenge, counted and logged
	forbid                 // a rule of the hub refuses a valid credential: a challenge, not counted
	retryLater             // a refusal that passes (429, 503)
	drained                // the hub drains: its clients come back elsewhere
	problem                // any other refusal
)

// serves reports whether v admits the request.
func (v verdict) serves() bool { return v.kind == serve }

// denied refuses a credential (see deny).
func denied(d denial, role token.Role, err error) verdict {
	return verdict{kind: deny, status: d.status, denial: d, role: role, err: err}
}

// unavailableFor refuses for now, with status (429 or 503) and why.
func unavailableFor(status int, why string) verdict {
	return verdict{kind: retryLater, status: status, detail: why}
}

// refuse writes v, a refusal, to w: once, whatever its kind.
func (h *Hub) refuse(w http.ResponseWriter, r *http.Request, v verdict) {
	switch v.kind {
	case deny:
		h.deny(w, r, v.denial, v.role, v.err)
	case forbid:
		h.challenge(w, v.status, v.denial.code, v.denial.description, v.detail)
	case retryLater:
		h.unavailable(w, r, v.status, v.detail)
	case drained:
		serveDrained(w)
	default:
		if v.err != nil {
			writeFormError(w, v.err)
			return
		}
		writeProblem(w, v.status, v.detail)
	}
}

// admit decides on r's credential for role: the principal it proves (nil
// for none), and the verdict of the hub's rules about it. It reads no
// body.
func (h *Hub) admit(r *http.Request, role token.Role) (*principal, verdict) {
	if role == token.Publisher && h.cfg.insecurePublish {
		return nil, verdict{} // anyone may publish: no credential is read
	}
	p, v := h.authenticate(r, role)
	switch {
	case !v.serves():
		return nil, v
	case p == nil && role == token.Publisher:
		return nil, denied(h.missingDenial(r), role, nil) // AUTH-1, AUTH-13: publishing needs a token
	case p == nil && h.authorizesSubscribers() && !h.cfg.anonymous:
		return nil, denied(h.missingDenial(r), role, nil) // AUTH-2, AUTH-13
	case p != nil && p.fromCookie && !h.sameOrigin(r, role == token.Subscriber):
		// SEC-4: a cookie rides along on cross-site requests; a stream
		// opened from another site would announce the user's
		// subscriptions, payload included. A stream whose request names
		// no origin at all is served (see sameOrigin).
		what := "a subscription authorized by a cookie or the application's session must not come from another origin than the hub's or one of WithCORS (its Origin header, Sec-Fetch-Site or Referer names another)"
		if role == token.Publisher {
			what = "a publish authenticated by a cookie must come from the hub's origin or an origin of WithCORS (its Origin or Referer header)"
		}
		return nil, verdict{kind: forbid, status: http.StatusForbidden, detail: what}
	case p != nil && role == token.Subscriber && !p.session && !time.Now().Before(p.expiry):
		// Within the clock leeway, yet a stream must end by exp (AUTH-37):
		// it would not get a single event.
		return nil, denied(denial{status: http.StatusUnauthorized, code: "invalid_token", reason: TokenExpired, description: h.describe(TokenExpired, "")}, role, nil)
	}
	return p, verdict{}
}
