package mercure

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mercurekit/mercure/internal/token"
)

// Every refusal of a token explains itself (RFC 6750 section 3): the
// challenge's error_description and the problem document's detail name
// the cause from a small fixed vocabulary, the reasons of [Metrics]
// TokenFailures, with a hint from the hub's configuration (the audience it
// expects, the option that accepts a pre-standard token). Nothing of the
// token is repeated, nor any key. The draft's rationale for a bare
// invalid_token is not to disclose why validation failed; what is
// disclosed here is the hub's own policy, which a client cannot use to
// forge anything, and without it a team migrating an application is left
// guessing (spec §Authorization: Error Responses).
//
// The first refusal of each reason is logged at Warn with the same
// description, the following ones at Debug: a misconfiguration shows at
// once, and no client can flood the log.

// denial is a refused request: its status, the OAuth error code of the
// challenge (none for a missing token) and the description.
type denial struct {
	status      int
	code        string
	reason      TokenFailure // for metrics and the log
	description string       // error_description: printable ASCII, no quote or backslash
	detail      string       // the problem document's detail, when it says more than description
}

// deny answers r with d, counts it and logs it; role and err (the
// verification error, if any) go to the log only.
func (h *Hub) deny(w http.ResponseWriter, r *http.Request, d denial, role token.Role, err error) {
	h.ops.metrics.tokenFailure(d.reason)
	h.logDenial(r.Context(), d, role, err)
	h.challenge(w, d.status, d.code, d.description, d.detail)
}

// logDenial logs d at Warn the first time its reason occurs, at Debug
// after.
func (h *Hub) logDenial(ctx context.Context, d denial, role token.Role, err error) {
	level := slog.LevelDebug
	if i := tokenReasonIndex(d.reason); !h.auth.deniedOnce[i].Load() && h.auth.deniedOnce[i].CompareAndSwap(false, true) {
		level = slog.LevelWarn
	}
	attrs := []any{"reason", d.reason, "role", role.String(), "description", d.description}
	if err != nil {
		attrs = append(attrs, "error", err) // names the failed check, never the token (SEC-9)
	}
	if level == slog.LevelWarn {
		attrs = append(attrs, "note", "first of its reason: the next ones are logged at Debug")
	}
	h.log.Log(ctx, level, "mercure: access refused", attrs...)
}

// tokenDenial describes the refusal of a token that failed verification.
func (h *Hub) tokenDenial(err error) denial {
	reason := TokenFailure(token.Reason(err)) // the token package's kinds are our reasons
	return denial{status: http.StatusUnauthorized, code: "invalid_token", reason: reason, description: h.describe(reason, token.Hint(err))}
}

// describe returns the description of a token refused for reason, with
// the token package's hint.
func (h *Hub) describe(reason TokenFailure, hint string) string {
	var d string
	switch reason {
	case TokenMalformed:
		d = "the access token is malformed"
	case TokenSignature:
		d = "the access token's signature does not verify with the keys this hub trusts"
	case TokenAlgorithm:
		d = "the access token's alg is not one this hub allows (" + strings.Join(h.algorithms(), ", ") + ")"
	case TokenType:
		d = "the access token's typ is not at+jwt (RFC 9068 JWT access token)"
		if h.cfg.legacy != nil {
			d += ", nor JWT for a pre-standard token"
		}
	case TokenLegacyClaim:
		d = "the access token is a pre-standard one (typ JWT, mercure claim); this hub accepts such tokens only in its compatibility mode: " + legacyOption
	case TokenExpired:
		d = "the access token expired"
	case TokenNotYetValid:
		d = "the access token is not valid yet: its nbf or iat is ahead of the hub's clock"
	case TokenAudience:
		d = "the access token's aud does not name this hub: expected " + h.url
	case TokenIssuer:
		d = "the access token's iss is not an issuer this hub trusts"
		if h.cfg.legacy != nil {
			d += " (a pre-standard token may carry only an iss of LegacyClients.Issuers)"
		}
	default:
		d = "the access token could not be verified"
	}
	if hint != "" {
		d += ": " + hint
	}
	return d
}

// algorithms lists the algorithms the hub allows, for descriptions.
func (h *Hub) algorithms() []string {
	if a := h.cfg.tokenPolicy.Algorithms; len(a) > 0 {
		return a
	}
	return []string{"EdDSA", "ES256", "ES384", "ES512", "RS256", "PS256", "HS256", "HS384", "HS512"}
}

// missingDenial describes a request that needed a token and presented
// none: the challenge has no error code then (AUTH-13), so the problem
// document alone says how to send one.
func (h *Hub) missingDenial(r *http.Request) denial {
	d := denial{status: http.StatusUnauthorized, reason: TokenMissing,
		description: "an access token is required: send it in the Authorization header (Bearer) or in the cookie " + h.cfg.cookieName}
	if hint := h.ignoredLegacyCredential(r); hint != "" {
		d.description += "; " + hint
	}
	return d
}

// grantDenial describes a valid token without the grant the request needs.
func grantDenial(description, detail string) denial {
	return denial{status: http.StatusForbidden, code: "insufficient_scope", reason: TokenGrants, description: description, detail: detail}
}

// ignoredLegacyCredential says what pre-standard credential r carries
// that the hub does not read without the compatibility mode, or "".
func (h *Hub) ignoredLegacyCredential(r *http.Request) string {
	if h.cfg.legacy != nil {
		return ""
	}
	switch {
	case h.cfg.cookieName != LegacyCookieName && len(r.CookiesNamed(LegacyCookieName)) > 0:
		return "the request has a " + LegacyCookieName + " cookie, which this hub reads only in its compatibility mode (" + legacyOption + ")"
	case strings.Contains(r.URL.RawQuery, "authorization=") && r.URL.Query().Has("authorization"):
		return "the request has an authorization query parameter, which this hub reads only in its compatibility mode (" + legacyOption + ")"
	}
	return ""
}

// descriptionChars keeps what an error_description may hold (RFC 6750
// section 3: %x20-21 / %x23-5B / %x5D-7E).
func descriptionChars(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7E || r == '"' || r == '\\' {
			return '?'
		}
		return r
	}, s)
}

// challenge answers with status and a Bearer challenge (RFC 6750): no
// error attribute when no token was presented (AUTH-13), the OAuth error
// code and its description otherwise (AUTH-14 to AUTH-16); with
// resource_metadata whenever the hub validates tokens (AUTH-17, DIS-8).
// The problem document's detail is detail, or else the description
// (AUTH-18: no OAuth code in it).
func (h *Hub) challenge(w http.ResponseWriter, status int, code, description, detail string) {
	var attrs []string
	if code != "" {
		attrs = append(attrs, `error="`+code+`"`)
		if description != "" {
			attrs = append(attrs, `error_description="`+descriptionChars(description)+`"`)
		}
	}
	if h.auth.verifier != nil {
		attrs = append(attrs, "resource_metadata="+quote(h.metadataURL()))
	}
	c := "Bearer"
	if len(attrs) > 0 {
		c += " " + strings.Join(attrs, ", ")
	}
	w.Header().Set("WWW-Authenticate", c)
	if detail == "" {
		detail = description
	}
	if detail == "" {
		detail = http.StatusText(status)
	}
	writeProblem(w, status, detail)
}

// publishGrantDenial describes a publish by p refused for topic number
// i.
func publishGrantDenial(p *principal, i int, topic string) denial {
	which := "the canonical topic"
	if i > 0 {
		which = fmt.Sprintf("alternate topic %d", i)
	}
	d := p.grantHolder() + " grants no publish on " + which + " of the update"
	return grantDenial(d, d+": "+topic)
}

// grantHolder names what gave p its grants, for refusals: an access
// token, or the application's session (WithAuthorizer).
func (p *principal) grantHolder() string {
	if p.session {
		return "the session"
	}
	return "the access token"
}
