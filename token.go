package mercure

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/mercurekit/mercure/internal/chars"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/token"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// defaultTokenTTL is the lifetime of a minted token when [Grant].TTL is 0:
// short, as browsers' tokens should be (spec §Authorization).
const defaultTokenTTL = 15 * time.Minute

// Match is a topic matcher in a grant: an exact topic, a URL pattern
// (Type [MatchURLPattern]) or "*" for every topic.
type Match struct {
	Pattern string
	Type    string // MatchExact (the default when empty) or MatchURLPattern
}

// Grant describes the access token an application gives one of its users
// or services.
type Grant struct {
	// Subject identifies the holder (sub); it is also the client_id unless
	// ClientID is set.
	Subject  string
	ClientID string
	// Publish lists the topics the holder may publish to: an update needs
	// publish on every one of its topics (spec §Authorization: Publishers).
	Publish []Match
	// Subscribe lists the topics whose private updates the holder may
	// receive: one of an update's topics is enough (spec §Authorization:
	// Subscribers).
	Subscribe []Match
	// Payload, when not nil, must marshal to a JSON object; it goes with
	// the subscribe grant: into the events and API documents of the
	// holder's subscriptions whose own matcher, taken as a topic, one of
	// Subscribe selects (spec §Authorization: Payloads). A subscription to
	// a topic outside them (a public one) or to * has none. Other
	// subscribers may see it: put nothing private in it.
	Payload any
	// TTL is how long the token is valid; 0 means 15 minutes.
	TTL time.Duration
}

// Signer mints RFC 9068 access tokens for an application that is its own
// issuer (spec §Authorization): typ at+jwt, iss, aud, sub, client_id, iat,
// exp, jti and authorization_details. Configure the hub with [WithIssuer]
// and [Keys] of the signer's public key (or its HMAC secret). A Signer is
// safe for concurrent use.
type Signer struct {
	key      jwk.Key
	alg      jwa.SignatureAlgorithm
	issuer   string
	audience string
	now      func() time.Time
	patterns *index.Cache // the grants' URL patterns, compiled against audience
}

// NewSigner returns a signer that signs with key as issuer, for the hub
// whose URL is audience. key is a private key (*ecdsa.PrivateKey P-256,
// P-384 or P-521; *rsa.PrivateKey of 2048 bits or more;
// ed25519.PrivateKey), [PEM] holding one, an [HMACSecret] of at least 32
// bytes, or a jwk.Key holding one of these (its alg and kid are used);
// give the hub the matching public key, or the same secret, with [Keys].
// A public, weak or unsupported key fails here, wrapping [ErrInvalidKey];
// an empty issuer, or an audience that is not an absolute URL, wrapping
// [ErrInvalidOption].
func NewSigner(key any, issuer, audience string) (*Signer, error) {
	if issuer == "" || audience == "" {
		return nil, fmt.Errorf("%w: NewSigner needs an issuer and an audience", ErrInvalidOption)
	}
	k, err := signingKey(key)
	if err != nil {
		return nil, err // says what is wrong with the key
	}
	alg, err := signingAlgorithm(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	// A key whose own alg does not fit it would fail every token: sign
	// once now.
	if _, err := jws.Sign([]byte("{}"), jws.WithKey(alg, k)); err != nil {
		return nil, fmt.Errorf("%w: cannot sign %s with this key: %v", ErrInvalidKey, alg, err)
	}
	resolver, err := topicurl.New(audience)
	if err != nil {
		return nil, fmt.Errorf("%w: NewSigner: the audience must be the hub URL: %v", ErrInvalidOption, err)
	}
	return &Signer{key: k, alg: alg, issuer: issuer, audience: audience, now: time.Now,
		patterns: index.NewCache(audience, resolver, patternCacheSize)}, nil
}

// signingAlgorithm is the key's own alg, or the usual one for its type.
func signingAlgorithm(key jwk.Key) (jwa.SignatureAlgorithm, error) {
	if a, ok := key.Algorithm(); ok {
		if alg, ok := jwa.LookupSignatureAlgorithm(a.String()); ok {
			return alg, nil
		}
	}
	switch key.KeyType() {
	case jwa.EC():
		var crv jwa.EllipticCurveAlgorithm
		if err := key.Get(jwk.ECDSACrvKey, &crv); err != nil {
			return jwa.SignatureAlgorithm{}, fmt.Errorf("EC key without a curve: %w", err)
		}
		switch crv {
		case jwa.P256():
			return jwa.ES256(), nil
		case jwa.P384():
			return jwa.ES384(), nil
		case jwa.P521():
			return jwa.ES512(), nil
		}
	case jwa.RSA():
		return jwa.RS256(), nil
	case jwa.OKP():
		return jwa.EdDSA(), nil
	case jwa.OctetSeq():
		return jwa.HS256(), nil
	}
	return jwa.SignatureAlgorithm{}, fmt.Errorf("no signature algorithm for key type %v", key.KeyType())
}

// Token mints a token carrying g.
func (s *Signer) Token(g Grant) (string, error) {
	ttl := g.TTL
	if ttl == 0 {
		ttl = defaultTokenTTL
	}
	if ttl < 0 {
		return "", fmt.Errorf("%w: negative token TTL %v", ErrInvalidGrant, ttl)
	}
	details, err := s.grantDetails(g)
	if err != nil {
		return "", err
	}
	clientID := g.ClientID
	if clientID == "" {
		clientID = g.Subject
	}
	now := s.now()
	tok, err := jwt.NewBuilder().
		Issuer(s.issuer).
		Audience([]string{s.audience}).
		Subject(g.Subject).
		Claim("client_id", clientID).
		IssuedAt(now).
		Expiration(now.Add(ttl)).
		JwtID(rand.Text()).
		Claim("authorization_details", details).
		Build()
	if err != nil {
		return "", fmt.Errorf("%w: building the token: %w", ErrInvalidGrant, err)
	}
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.TypeKey, "at+jwt"); err != nil {
		return "", fmt.Errorf("mercure: signing token: %w", err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(s.alg, s.key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", fmt.Errorf("mercure: signing token: %w: %w", ErrInvalidKey, err)
	}
	return string(signed), nil
}

// isLocalhost reports whether host is one that browsers treat as a
// secure context over plain http: localhost, its subdomains, and the
// loopback addresses.
func isLocalhost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// grantDetails turns a grant into Mercure authorization details: one per
// action, so that the payload goes with subscribe only. A grant of
// nothing is an empty list, which a hub accepts (an identity without
// rights), never null, which it refuses.
func (s *Signer) grantDetails(g Grant) ([]any, error) {
	details := []any{}
	add := func(action string, ms []Match, payload any) error {
		if len(ms) == 0 {
			return nil
		}
		// The limits a hub with the defaults applies to a token's grants.
		if len(ms) > defaultLimits.MaxMatchers {
			return fmt.Errorf("%w: more than %d %s matches", ErrInvalidGrant, defaultLimits.MaxMatchers, action)
		}
		topics := make([]map[string]string, len(ms))
		for i, m := range ms {
			typ := m.Type
			if typ == "" {
				typ = MatchExact
			}
			if typ != MatchExact && typ != MatchURLPattern {
				return fmt.Errorf("%w: unsupported match type %q", ErrInvalidGrant, m.Type)
			}
			if m.Pattern == "" || !chars.Valid(m.Pattern) {
				return fmt.Errorf("%w: invalid match %q", ErrInvalidGrant, m.Pattern)
			}
			if len(m.Pattern) > defaultLimits.MaxMatcherBytes {
				return fmt.Errorf("%w: a match of %d bytes, more than %d", ErrInvalidGrant, len(m.Pattern), defaultLimits.MaxMatcherBytes)
			}
			if typ == MatchURLPattern {
				// A hub with the default limits refuses a token whose
				// pattern does not compile or costs too much: say so now.
				if _, err := s.patterns.Get(m.Pattern, defaultLimits.Patterns.limit()); err != nil {
					return fmt.Errorf("%w: URL pattern %q: %w", ErrInvalidGrant, m.Pattern, err)
				}
			}
			topics[i] = map[string]string{"match": m.Pattern, "match_type": typ}
		}
		d := map[string]any{"type": token.DetailType, "actions": []string{action}, "topics": topics}
		if payload != nil {
			b, err := json.Marshal(payload)
			if err != nil || len(b) == 0 || b[0] != '{' {
				return fmt.Errorf("%w: the payload must marshal to a JSON object", ErrInvalidGrant)
			}
			d["payload"] = json.RawMessage(b)
		}
		details = append(details, d)
		return nil
	}
	if err := add("publish", g.Publish, nil); err != nil {
		return nil, err
	}
	if err := add("subscribe", g.Subscribe, g.Payload); err != nil {
		return nil, err
	}
	return details, nil
}

// SetCookie sets the cookie through which browsers present tok to the
// hub's EventSource streams (spec §Authorization: Cookie): Secure, HttpOnly,
// SameSite=Strict, Path the hub path, expiring with the token. The hub and
// the application must share a registrable domain.
//
// Browsers keep a Secure cookie only from https:// origins and from
// http://localhost: on a hub URL that is plain http:// on any other host
// (http://app.internal in development, say), SetCookie returns
// [ErrInsecureCookie] rather than set a cookie that would be dropped
// without a word. Serve such a hub over https, or develop on localhost.
func (h *Hub) SetCookie(w http.ResponseWriter, tok string) error {
	if u := h.cfg.url; u.Scheme == "http" && !isLocalhost(u.Hostname()) {
		return fmt.Errorf("%w: the hub URL is %s; serve it over https, or use localhost in development", ErrInsecureCookie, h.url)
	}
	// Only exp is read here: the hub verifies the token when it is used.
	parsed, err := jwt.ParseInsecure([]byte(tok))
	if err != nil {
		return fmt.Errorf("%w: reading its expiry: %w", ErrInvalidToken, err)
	}
	exp, ok := parsed.Expiration()
	if !ok {
		return fmt.Errorf("%w: no exp", ErrInvalidToken)
	}
	http.SetCookie(w, &http.Cookie{
		Name:     h.cfg.cookieName,
		Value:    tok,
		Path:     h.cfg.url.Path,
		Expires:  exp,
		Secure:   true,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	return nil
}
