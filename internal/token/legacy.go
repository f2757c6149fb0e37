package token

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/mercurekit/mercure/internal/chars"
	"github.com/mercurekit/mercure/internal/uritemplate"
)

// Legacy configures the verification of the tokens of the pre-standard
// drafts, which clients such as Symfony's Mercure component still mint: a
// JWS whose typ is JWT or absent, with a "mercure" claim (or the same
// under "https://mercure.rocks/", as identity providers that need
// namespaced claims issue it) holding "publish" and "subscribe" arrays of
// topic selectors and an optional "payload".
//
// Such a token has no audience and usually no issuer, so it is verified
// only with the keys named here, which must belong to this hub alone. iss,
// aud and exp are checked when present: iss must be one of Issuers, aud
// must name the resource, exp must not have passed (a token without exp
// never expires). nbf and iat are checked as for any token.
type Legacy struct {
	PublisherKeys, SubscriberKeys jwk.Set
	Issuers                       []string
}

type legacyKeys struct {
	keys    [2][]candidate
	issuers []string
}

func newLegacyKeys(l *Legacy) (*legacyKeys, error) {
	lk := &legacyKeys{issuers: slices.Clone(l.Issuers)}
	for r, set := range [2]jwk.Set{l.PublisherKeys, l.SubscriberKeys} {
		cs, err := candidates(set, false)
		if err != nil {
			return nil, fmt.Errorf("token: legacy %s keys: %w", Role(r), err)
		}
		lk.keys[r] = cs
	}
	return lk, nil
}

// Names of the legacy claim.
const (
	claimLegacy           = "mercure"
	claimLegacyNamespaced = "https://mercure.rocks/"
)

// maxNumericDateTime is the expiry of a legacy token without exp.
var maxNumericDateTime = time.Unix(maxNumericDate, 0)

// isLegacyType reports whether the protected header of the compact JWS raw
// says typ JWT, or nothing: the tokens of the drafts. A header that does
// not decode is left to the usual path, which refuses it.
func isLegacyType(raw string) bool {
	seg, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return false
	}
	var h struct {
		Typ *string `json:"typ"`
	}
	if json.Unmarshal(b, &h) != nil {
		return false
	}
	return h.Typ == nil || normalType(*h.Typ) == "jwt"
}

// hasLegacyClaim reports whether the claims text holds a legacy claim,
// to tell a client that sends one what it takes to be accepted.
func hasLegacyClaim(payload []byte) bool {
	var c struct {
		Mercure    json.RawMessage `json:"mercure"`
		Namespaced json.RawMessage `json:"https://mercure.rocks/"`
	}
	return json.Unmarshal(payload, &c) == nil && (c.Mercure != nil || c.Namespaced != nil)
}

// verifyLegacy verifies raw, whose header says typ JWT or nothing, as a
// legacy token.
func (v *Verifier) verifyLegacy(ctx context.Context, raw string, role Role) (*Token, *verifyState, error) {
	v.verifies.Add(1)
	st := &verifyState{role: role}
	opts := []jwt.ParseOption{
		jwt.WithValidate(true),
		jwt.WithAcceptableSkew(v.leeway),
		jwt.WithClock(jwt.ClockFunc(v.now)),
		jwt.WithTypedClaim(claimLegacy, json.RawMessage{}),
		jwt.WithTypedClaim(claimLegacyNamespaced, json.RawMessage{}),
		jwt.WithTypedClaim(claimDetails, json.RawMessage{}),
		jwt.WithKeyProvider(jws.KeyProviderFunc(func(_ context.Context, sink jws.KeySink, sig *jws.Signature, msg *jws.Message) error {
			return v.legacyKeys(st, sink, sig, msg)
		})),
	}
	tok, err := jwt.ParseString(raw, opts...)
	if err != nil {
		return nil, nil, st.parseFailure(err)
	}
	if err := checkClaims(st.payload); err != nil {
		return nil, nil, withHint(KindMalformed, HintClaims, invalid("claims: %v", err))
	}
	t := &Token{Legacy: true, Expiry: maxNumericDateTime}
	if iss, ok := tok.Issuer(); ok || st.issuer != "" {
		if iss != st.issuer {
			return nil, nil, withKind(KindIssuer, invalid("iss %q differs from the one read first %q", iss, st.issuer))
		}
		t.Issuer = iss
	}
	if tok.Has(jwt.AudienceKey) {
		aud, _ := tok.Audience()
		if !slices.Contains(aud, v.resource) {
			return nil, nil, withKind(KindAudience, invalid("aud %q does not hold %q", aud, v.resource))
		}
	}
	if exp, ok := tok.Expiration(); ok {
		// jwx ignores exp when it equals the Unix epoch; check it ourselves.
		if !v.now().Before(exp.Add(v.leeway)) {
			return nil, nil, withKind(KindExpired, invalid("expired at %v", exp))
		}
		t.Expiry = exp
	}
	if err := claimStrings(tok, t); err != nil {
		return nil, nil, err
	}
	if tok.Has(claimDetails) {
		return nil, nil, withHint(KindType, HintLegacyDetails, invalid("authorization_details in a token of typ JWT"))
	}
	claim, err := legacyClaim(tok)
	if err != nil {
		return nil, nil, err
	}
	if claim != nil {
		if t.Details, t.Payload, err = v.parseLegacyClaim(claim); err != nil {
			return nil, nil, withHint(KindMalformed, HintLegacyClaim, err)
		}
	}
	st.nbf, _ = tok.NotBefore()
	st.iat, _ = tok.IssuedAt()
	return t, st, nil
}

// legacyKeys is the key provider of legacy tokens: the legacy keys of the
// role, and the header rules of every token.
func (v *Verifier) legacyKeys(st *verifyState, sink jws.KeySink, sig *jws.Signature, msg *jws.Message) error {
	h, alg, err := v.checkHeader(st, sig)
	if err != nil {
		return err
	}
	st.payload = msg.Payload()
	if typ, ok := h.Type(); ok && normalType(typ) != "jwt" {
		// What we read first said otherwise: two readings of one header.
		return st.refuse(KindType, "", "typ %q in a token read as legacy", typ)
	}
	var claims struct {
		Iss *string `json:"iss"`
	}
	if err := json.Unmarshal(st.payload, &claims); err != nil {
		return st.refuse(KindMalformed, HintJSON, "payload: %v", err)
	}
	if claims.Iss != nil {
		if !slices.Contains(v.legacy.issuers, *claims.Iss) {
			return st.refuse(KindIssuer, "", "legacy token of issuer %q", *claims.Iss)
		}
		st.issuer = *claims.Iss
	}
	kid, hasKid := h.KeyID()
	if !offerKeys(sink, v.legacy.keys[st.role], alg, kid, hasKid) {
		return st.refuse(KindSignature, HintNoKey, "no legacy %s key fits alg %s kid %q", st.role, alg, kid)
	}
	return nil
}

// legacyClaim returns the value of the legacy claim, nil when the token
// has none.
func legacyClaim(tok jwt.Token) (json.RawMessage, error) {
	var out json.RawMessage
	for _, name := range []string{claimLegacy, claimLegacyNamespaced} {
		if !tok.Has(name) {
			continue
		}
		if out != nil {
			return nil, withHint(KindMalformed, HintLegacyClaim, invalid("both %s and %s", claimLegacy, claimLegacyNamespaced))
		}
		if err := tok.Get(name, &out); err != nil {
			return nil, withHint(KindMalformed, HintLegacyClaim, invalid("%s: %v", name, err))
		}
	}
	return out, nil
}

// parseLegacyClaim reads the legacy claim: an object, or a string holding
// one (identity providers that allow only string claims issue it so),
// with publish and subscribe arrays of selectors and a payload object.
// It returns a detail per action that has selectors.
func (v *Verifier) parseLegacyClaim(raw json.RawMessage) ([]Detail, json.RawMessage, error) {
	raw = trimJSON(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, invalid("%s: %v", claimLegacy, err)
		}
		raw = json.RawMessage(s)
	}
	obj, dups, err := object(raw)
	if err != nil {
		return nil, nil, invalid("%s: %v", claimLegacy, err)
	}
	if len(dups) > 0 {
		return nil, nil, invalid("%s: duplicate member %q", claimLegacy, dups[0])
	}
	var details []Detail
	for _, action := range []string{"publish", "subscribe"} {
		ms, err := v.legacySelectors(obj[action])
		if err != nil {
			return nil, nil, invalid("%s.%s: %v", claimLegacy, action, err)
		}
		if len(ms) > 0 {
			details = append(details, Detail{Publish: action == "publish", Subscribe: action == "subscribe", Topics: ms})
		}
	}
	var payload json.RawMessage
	if p, ok := obj["payload"]; ok {
		p = trimJSON(p)
		switch {
		case string(p) == "null":
		case len(p) == 0 || p[0] != '{':
			return nil, nil, invalid("%s.payload is not an object", claimLegacy)
		default:
			payload = append(json.RawMessage(nil), p...)
		}
	}
	return details, payload, nil
}

// legacySelectors reads an array of topic selectors: strings, as the
// drafts wrote them ("*", an exact topic or a URI template), or matcher
// objects as in authorization details, which some clients of the
// transition sent. Absent or null means none.
func (v *Verifier) legacySelectors(raw json.RawMessage) ([]Matcher, error) {
	raw = trimJSON(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '[' {
		return nil, errors.New("not an array")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	if len(elems) > v.maxTopics {
		return nil, fmt.Errorf("more than %d selectors", v.maxTopics)
	}
	out := make([]Matcher, 0, len(elems))
	for i, e := range elems {
		e = trimJSON(e)
		if len(e) > 0 && e[0] == '{' {
			m, err := v.parseMatcher(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, m)
			continue
		}
		s, err := str(e, fmt.Sprintf("[%d]", i))
		if err != nil {
			return nil, err
		}
		m, err := v.legacySelector(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// legacySelector classifies a selector as the drafts did: "*" matches
// every topic, a URI template its expansions, anything else itself.
func (v *Verifier) legacySelector(s string) (Matcher, error) {
	switch {
	case s == "":
		return Matcher{}, errors.New("empty selector")
	case !chars.Valid(s):
		return Matcher{}, errors.New("selector holds invalid UTF-8, control or format characters")
	case len(s) > v.maxMatchBytes:
		return Matcher{}, fmt.Errorf("selector of %d bytes exceeds %d", len(s), v.maxMatchBytes)
	case s == MatchAll:
		return Matcher{Type: MatchExact, Match: s}, nil
	case !uritemplate.IsTemplate(s):
		return Matcher{Type: MatchExact, Match: s}, nil
	}
	m := Matcher{Type: MatchURITemplate, Match: s}
	if v.checkMatcher != nil {
		if err := v.check(m); err != nil {
			return m, fmt.Errorf("%s selector: %w", m.Type, err)
		}
	}
	return m, nil
}
