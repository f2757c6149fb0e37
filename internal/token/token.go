// Package token validates the JWT access tokens (RFC 9068) presented to the
// hub and extracts their Mercure authorization details.
//
// Verification keys come only from the configuration: each trusted issuer
// has one key set for the publish endpoint and one for the subscribe
// endpoint, or a KeySource (an authorization server's JWK Set) for both,
// and a token is verified only with the set that belongs to its "iss"
// claim and to the endpoint's role. Key material carried in token
// headers (jwk, jku, x5u, x5c) is never used; "kid" only narrows the choice
// among trusted keys.
//
// Every failure wraps ErrInvalid. [Reason] classifies it into a small
// fixed vocabulary and [Hint] adds a fixed phrase; neither repeats
// anything of the token, so both may be shown to the client. The error
// text names the failed check in more detail, with values from the token,
// and is meant for logs only.
//
// With Options.Legacy, the Verifier also accepts the tokens of the
// pre-standard drafts (see [Legacy]).
package token

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/mercurekit/mercure/internal/chars"
)

// Role is the endpoint a token is presented to; it selects the key set.
type Role int

const (
	// Publisher is the role of tokens presented to the publish endpoint.
	Publisher Role = iota
	// Subscriber is the role of tokens presented to the subscribe endpoint.
	Subscriber
)

// String returns "publisher" or "subscriber".
func (r Role) String() string {
	switch r {
	case Publisher:
		return "publisher"
	case Subscriber:
		return "subscriber"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ErrInvalid is wrapped by every error Verify returns. The caller answers
// 401 invalid_token, describes the cause with [Reason] and [Hint], and logs
// the error.
var ErrInvalid = errors.New("token: invalid")

// DetailType is the authorization_details type of Mercure details.
const DetailType = "https://mercure.rocks/authorization-detail"

// Matcher types accepted in the topics of a Mercure detail.
const (
	// MatchExact is the default matcher type: byte-for-byte equality.
	MatchExact = "exact"
	// MatchURLPattern is the WHATWG URL Pattern matcher type.
	MatchURLPattern = "urlpattern"
	// MatchAll is the universal wildcard match value (MAT-4). It is
	// recognized before the matcher type is considered.
	MatchAll = "*"
	// MatchURITemplate is the type of the URI template selectors of
	// legacy tokens (see [Legacy]); modern tokens cannot name it.
	MatchURITemplate = "uritemplate"
)

// Defaults and hard limits of Options.
const (
	DefaultLeeway        = 5 * time.Second
	DefaultMaxTokenBytes = 8192
	DefaultMaxDetails    = 32
	DefaultMaxTopics     = 64
	DefaultMaxMatchBytes = 2048
	// MaxKeysPerSet bounds how many keys one issuer may have per role:
	// a token without a matching kid is checked against each of them.
	MaxKeysPerSet = 16
	// MinRSABits is the smallest accepted RSA modulus.
	MinRSABits = 2048
	// MinHMACBytes is the smallest accepted HMAC secret.
	MinHMACBytes = 32
)

// Issuer binds a trusted issuer id to its keys: tokens for the publish
// endpoint are verified with PublisherKeys only, subscriber tokens with
// SubscriberKeys only (AUTH-6, AUTH-22). Either set may be nil, in which
// case the issuer cannot issue tokens for that role. The sets are read once,
// by New: to rotate keys, build a new Verifier.
//
// An issuer whose keys change at run time (an authorization server
// publishing a JWK Set) has Keys instead, and no static sets: its current
// set verifies the tokens of both roles.
type Issuer struct {
	ID             string
	PublisherKeys  jwk.Set
	SubscriberKeys jwk.Set
	Keys           KeySource
}

// KeySource supplies the current key set of a dynamic issuer. The sets it
// returns are read, never modified; their keys are subject to the same
// rules as static ones (use, key_ops, alg, key type and strength), except
// that an unusable key is skipped instead of being an error.
type KeySource interface {
	// Keys returns the current set. It is called for every token of the
	// issuer, and must be cheap once the set is known.
	Keys(ctx context.Context) (jwk.Set, error)
	// Refresh is called when a token names a kid the current set lacks.
	// It may fetch the set anew, or, to bound the load a stream of bogus
	// kids could cause, return the current set unchanged.
	Refresh(ctx context.Context) (jwk.Set, error)
}

// Options configures a Verifier.
type Options struct {
	// Resource is the hub's resource identifier, required in "aud"
	// (AUTH-24). Required.
	Resource string
	// Issuers lists the trusted issuers, ids unique; at least one unless
	// Legacy is set.
	Issuers []Issuer
	// Algorithms is the allowlist of "alg" values. Nil means EdDSA, ES256,
	// ES384, ES512, RS256, PS256, HS256, HS384 and HS512; the HS* ones can
	// only ever verify with oct keys, so they are effective only for
	// issuers whose sets hold such keys. "none" is never accepted.
	Algorithms []jwa.SignatureAlgorithm
	// Leeway is the clock skew allowed for exp, nbf and iat. Zero means
	// DefaultLeeway; negative is an error.
	Leeway time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// MaxTokenBytes bounds the raw token length; zero means
	// DefaultMaxTokenBytes.
	MaxTokenBytes int
	// MaxDetails bounds the number of Mercure details; zero means
	// DefaultMaxDetails.
	MaxDetails int
	// MaxTopics bounds the entries of one topics array; zero means
	// DefaultMaxTopics.
	MaxTopics int
	// MaxMatchBytes bounds the length of one match value; zero means
	// DefaultMaxMatchBytes.
	MaxMatchBytes int
	// CheckMatcher validates a matcher of a detail (e.g. compiles a URL
	// pattern); nil accepts any. It is called for values other than "*"
	// with type "exact" or "urlpattern". An error or a panic invalidates
	// the token.
	CheckMatcher func(matchType, match string) error
	// CacheSize bounds how many verified tokens the Verifier remembers,
	// so that a token presented again is not verified again (see cache);
	// zero means DefaultCacheSize, negative remembers none.
	CacheSize int
	// Legacy, when not nil, makes the Verifier accept pre-standard
	// tokens too (see [Legacy]).
	Legacy *Legacy
}

// Token holds the claims of a verified token.
type Token struct {
	Issuer  string
	Subject string
	// Session is the sid claim (OpenID Connect's session id), if any.
	Session  string
	ClientID string
	JTI      string
	Expiry   time.Time
	// Details are the token's Mercure details in array order; empty when
	// the token grants nothing.
	Details []Detail
	// Legacy is whether this is a pre-standard token (see [Legacy]); its
	// Payload, when not nil, goes with every subscription of the stream
	// it authorizes, as the drafts' mercure.payload did.
	Legacy  bool
	Payload json.RawMessage
}

// Detail is one Mercure authorization detail.
type Detail struct {
	Publish   bool
	Subscribe bool
	// Topics is never empty.
	Topics []Matcher
	// Payload is nil when absent and always a JSON object when present.
	Payload json.RawMessage
}

// Matcher is one entry of a detail's topics.
type Matcher struct {
	// Type is "exact" (the default) or "urlpattern"; when Match is "*" it
	// is kept as given, whatever it says (AUTH-40).
	Type string
	// Match is the matcher value; "*" matches every topic whatever Type
	// says.
	Match string
}

// MatchesAll reports whether m is the universal wildcard.
func (m Matcher) MatchesAll() bool { return m.Match == MatchAll }

// Verifier validates access tokens. It is safe for concurrent use.
type Verifier struct {
	resource      string
	issuers       map[string]*issuerKeys
	allowed       map[string]jwa.SignatureAlgorithm
	leeway        time.Duration
	now           func() time.Time
	maxTokenBytes int
	maxDetails    int
	maxTopics     int
	maxMatchBytes int
	checkMatcher  func(matchType, match string) error
	parseOpts     []jwt.ParseOption
	legacy        *legacyKeys  // nil without Options.Legacy
	cache         *cache       // nil when disabled
	verifies      atomic.Int64 // tokens verified from scratch, for tests
}

type issuerKeys struct {
	id   string
	keys [2][]candidate // indexed by Role; static issuers only
	src  KeySource      // dynamic issuers only

	mu        sync.Mutex
	lastSet   jwk.Set // the set lastCands was computed from
	lastCands []candidate
	lastErr   error
}

// dynamicCandidates returns the candidates of the source's current set,
// refreshing it once when kid is not in it. Candidates are recomputed only
// when the set changes.
func (ik *issuerKeys) dynamicCandidates(ctx context.Context, kid string, hasKid bool) ([]candidate, jwk.Set, error) {
	set, err := ik.src.Keys(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("issuer %q keys: %w", ik.id, err)
	}
	cs, err := ik.setCandidates(set)
	if err != nil {
		return nil, nil, err
	}
	if hasKid && !slices.ContainsFunc(cs, func(c candidate) bool { return c.kid == kid }) {
		// An unknown kid may be a key the issuer just rotated in.
		if set, err = ik.src.Refresh(ctx); err != nil {
			return nil, nil, fmt.Errorf("issuer %q keys: %w", ik.id, err)
		}
		if cs, err = ik.setCandidates(set); err != nil {
			return nil, nil, err
		}
	}
	return cs, set, nil
}

func (ik *issuerKeys) setCandidates(set jwk.Set) ([]candidate, error) {
	if set == nil {
		return nil, fmt.Errorf("issuer %q has no key set", ik.id)
	}
	ik.mu.Lock()
	defer ik.mu.Unlock()
	if ik.lastSet != set {
		ik.lastSet = set
		ik.lastCands, ik.lastErr = candidates(set, true)
	}
	return ik.lastCands, ik.lastErr
}

// candidate is a trusted verification key, pre-exported.
type candidate struct {
	kid   string
	alg   string // the key's own "alg", or ""
	kty   string // "EC", "RSA", "OKP", "oct"
	crv   string // EC curve name
	bytes int    // oct secret length
	raw   any
}

var defaultAlgorithms = []jwa.SignatureAlgorithm{
	jwa.EdDSA(), jwa.ES256(), jwa.ES384(), jwa.ES512(), jwa.RS256(), jwa.PS256(),
	jwa.HS256(), jwa.HS384(), jwa.HS512(),
}

// New validates o and returns a Verifier.
func New(o Options) (*Verifier, error) {
	if o.Resource == "" {
		return nil, errors.New("token: empty Resource")
	}
	if len(o.Issuers) == 0 && o.Legacy == nil {
		return nil, errors.New("token: no Issuers")
	}
	if o.Leeway < 0 {
		return nil, errors.New("token: negative Leeway")
	}
	v := &Verifier{
		resource:      o.Resource,
		issuers:       make(map[string]*issuerKeys, len(o.Issuers)),
		allowed:       make(map[string]jwa.SignatureAlgorithm),
		leeway:        o.Leeway,
		now:           o.Now,
		checkMatcher:  o.CheckMatcher,
		maxTokenBytes: o.MaxTokenBytes,
		maxDetails:    o.MaxDetails,
		maxTopics:     o.MaxTopics,
		maxMatchBytes: o.MaxMatchBytes,
	}
	if v.leeway == 0 {
		v.leeway = DefaultLeeway
	}
	switch {
	case o.CacheSize == 0:
		v.cache = newCache(DefaultCacheSize)
	case o.CacheSize > 0:
		v.cache = newCache(o.CacheSize)
	}
	if v.now == nil {
		v.now = time.Now
	}
	for _, l := range []struct {
		p   *int
		def int
		n   string
	}{
		{&v.maxTokenBytes, DefaultMaxTokenBytes, "MaxTokenBytes"},
		{&v.maxDetails, DefaultMaxDetails, "MaxDetails"},
		{&v.maxTopics, DefaultMaxTopics, "MaxTopics"},
		{&v.maxMatchBytes, DefaultMaxMatchBytes, "MaxMatchBytes"},
	} {
		switch {
		case *l.p < 0:
			return nil, fmt.Errorf("token: negative %s", l.n)
		case *l.p == 0:
			*l.p = l.def
		}
	}
	algs := o.Algorithms
	if algs == nil {
		algs = defaultAlgorithms
	}
	if len(algs) == 0 {
		return nil, errors.New("token: empty Algorithms")
	}
	for _, a := range algs {
		if keyTypeFor(a.String()) == "" {
			return nil, fmt.Errorf("token: unsupported algorithm %q", a.String())
		}
		v.allowed[a.String()] = a
	}
	for i, is := range o.Issuers {
		if is.ID == "" {
			return nil, fmt.Errorf("token: issuer %d: empty ID", i)
		}
		if _, dup := v.issuers[is.ID]; dup {
			return nil, fmt.Errorf("token: duplicate issuer %q", is.ID)
		}
		ik := &issuerKeys{id: is.ID}
		if is.Keys != nil {
			if is.PublisherKeys != nil || is.SubscriberKeys != nil {
				return nil, fmt.Errorf("token: issuer %q has both Keys and static key sets", is.ID)
			}
			ik.src = is.Keys
			v.issuers[is.ID] = ik
			continue
		}
		for r, set := range [2]jwk.Set{is.PublisherKeys, is.SubscriberKeys} {
			cs, err := candidates(set, false)
			if err != nil {
				return nil, fmt.Errorf("token: issuer %q, %s keys: %w", is.ID, Role(r), err)
			}
			ik.keys[r] = cs
		}
		if len(ik.keys[Publisher]) == 0 && len(ik.keys[Subscriber]) == 0 {
			return nil, fmt.Errorf("token: issuer %q has no usable signature key", is.ID)
		}
		v.issuers[is.ID] = ik
	}
	if o.Legacy != nil {
		lk, err := newLegacyKeys(o.Legacy)
		if err != nil {
			return nil, err
		}
		v.legacy = lk
	}
	v.parseOpts = []jwt.ParseOption{
		jwt.WithValidate(true),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithRequiredClaim(jwt.IssuerKey),
		jwt.WithAudience(v.resource),
		jwt.WithAcceptableSkew(v.leeway),
		jwt.WithClock(jwt.ClockFunc(v.now)),
		jwt.WithTypedClaim(claimDetails, json.RawMessage{}),
	}
	return v, nil
}

const claimDetails = "authorization_details"

// keyTypeFor returns the key type an algorithm needs, or "" if the
// algorithm is not supported.
func keyTypeFor(alg string) string {
	switch alg {
	case "ES256", "ES384", "ES512":
		return "EC"
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		return "RSA"
	case "EdDSA", "Ed25519":
		return "OKP"
	case "HS256", "HS384", "HS512":
		return "oct"
	}
	return ""
}

// fits reports whether alg may be verified with c.
func (c *candidate) fits(alg string) bool {
	if c.alg != "" && c.alg != alg {
		return false
	}
	if keyTypeFor(alg) != c.kty {
		return false
	}
	switch alg {
	case "ES256":
		return c.crv == "P-256"
	case "ES384":
		return c.crv == "P-384"
	case "ES512":
		return c.crv == "P-521"
	case "HS384":
		return c.bytes >= 48
	case "HS512":
		return c.bytes >= 64
	}
	return true
}

// candidates snapshots the signature keys of set, checking their strength.
// Keys reserved for another use are skipped; so are unusable keys when
// lenient is set, instead of failing the whole set.
func candidates(set jwk.Set, lenient bool) ([]candidate, error) {
	if set == nil {
		return nil, nil
	}
	var out []candidate
	for i := range set.Len() {
		k, ok := set.Key(i)
		if !ok {
			continue
		}
		c, ok, err := keyCandidate(k, i)
		switch {
		case err != nil && !lenient:
			return nil, err
		case err == nil && ok:
			out = append(out, c)
		}
	}
	if len(out) > MaxKeysPerSet {
		return nil, fmt.Errorf("%d keys, at most %d allowed", len(out), MaxKeysPerSet)
	}
	return out, nil
}

// keyCandidate exports the signature key k, number i of its set; ok is
// false when k is meant for another use.
func keyCandidate(k jwk.Key, i int) (c candidate, ok bool, err error) {
	if use, ok := k.KeyUsage(); ok && use != "" && use != "sig" {
		return c, false, nil
	}
	if ops, ok := k.KeyOps(); ok && len(ops) > 0 {
		if !slices.Contains(ops, jwk.KeyOpVerify) {
			return c, false, nil
		}
	}
	c.kid, _ = k.KeyID()
	if a, ok := k.Algorithm(); ok && a.String() != "" {
		c.alg = a.String()
		if keyTypeFor(c.alg) == "" {
			return c, false, nil // e.g. an encryption algorithm
		}
	}
	pub := k
	if k.KeyType() != jwa.OctetSeq() {
		if pub, err = k.PublicKey(); err != nil {
			return c, false, fmt.Errorf("key %d: %w", i, err)
		}
	}
	var raw any
	if err := jwk.Export(pub, &raw); err != nil {
		return c, false, fmt.Errorf("key %d: %w", i, err)
	}
	switch rk := raw.(type) {
	case *ecdsa.PublicKey:
		c.kty, c.crv = "EC", rk.Curve.Params().Name
		if c.crv != "P-256" && c.crv != "P-384" && c.crv != "P-521" {
			return c, false, fmt.Errorf("key %d: unsupported curve %s", i, c.crv)
		}
	case *rsa.PublicKey:
		c.kty = "RSA"
		if rk.N.BitLen() < MinRSABits {
			return c, false, fmt.Errorf("key %d: RSA key of %d bits, want at least %d", i, rk.N.BitLen(), MinRSABits)
		}
	case ed25519.PublicKey:
		c.kty = "OKP"
	case []byte:
		c.kty, c.bytes = "oct", len(rk)
		if len(rk) < MinHMACBytes {
			return c, false, fmt.Errorf("key %d: HMAC secret of %d bytes, want at least %d", i, len(rk), MinHMACBytes)
		}
	default:
		return c, false, fmt.Errorf("key %d: unsupported key type %T", i, raw)
	}
	if c.alg != "" && keyTypeFor(c.alg) != c.kty {
		return c, false, fmt.Errorf("key %d: alg %s does not fit key type %s", i, c.alg, c.kty)
	}
	c.raw = raw
	return c, true, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// isCompact reports whether raw is made of three base64url segments.
func isCompact(raw string) bool {
	dots := 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '.':
			dots++
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return dots == 2
}

// verifyState is the per-call state shared with the key provider.
type verifyState struct {
	role     Role
	issuer   string
	set      jwk.Set   // the key set of a dynamic issuer, once chosen
	nbf, iat time.Time // once verified
	calls    int
	payload  []byte // the claims text, not yet verified when kept
	// fail is why the key provider refused the token: jwx does not pass
	// its error on.
	fail error
}

// refuse records why the key provider refuses the token and returns it.
func (st *verifyState) refuse(kind, hint, format string, args ...any) error {
	st.fail = withHint(kind, hint, invalid(format, args...))
	return st.fail
}

// Verify validates raw for role and returns its claims. Every failure
// wraps ErrInvalid; [Reason] and [Hint] say why in words fit for the
// client.
func (v *Verifier) Verify(raw string, role Role) (*Token, error) {
	return v.VerifyContext(context.Background(), raw, role)
}

// VerifyContext is Verify with a context, which bounds the wait for the
// key set of a dynamic issuer. A token verified before is not verified
// again while it is remembered (see Options.CacheSize), unless it expired
// or, for an issuer whose keys are fetched, the key set changed since. The
// returned Token may be shared: callers must not modify it.
func (v *Verifier) VerifyContext(ctx context.Context, raw string, role Role) (*Token, error) {
	if role != Publisher && role != Subscriber {
		return nil, withKind(KindOther, invalid("unknown role %d", int(role)))
	}
	if len(raw) > v.maxTokenBytes {
		return nil, withHint(KindMalformed, HintTooLarge, invalid("token of %d bytes exceeds %d", len(raw), v.maxTokenBytes))
	}
	if v.cache == nil {
		tok, _, err := v.verify(ctx, raw, role)
		return tok, err
	}
	key := cacheKey(raw, role)
	if e := v.cache.get(key); e != nil {
		if v.stillValid(ctx, e) {
			return e.tok, nil
		}
		v.cache.drop(key)
	}
	tok, st, err := v.verify(ctx, raw, role)
	if err != nil {
		return nil, err
	}
	v.cache.put(&cacheEntry{key: key, tok: tok, nbf: st.nbf, iat: st.iat, set: st.set})
	return tok, nil
}

// stillValid re-checks a remembered token: not expired, and verified with
// the key set its issuer has now.
func (v *Verifier) stillValid(ctx context.Context, e *cacheEntry) bool {
	now := v.now()
	if !now.Before(e.tok.Expiry.Add(v.leeway)) || now.Add(v.leeway).Before(e.nbf) || now.Add(v.leeway).Before(e.iat) {
		return false
	}
	if e.set == nil {
		return true // a static issuer's keys never change
	}
	cur, err := v.issuers[e.tok.Issuer].src.Keys(ctx)
	return err == nil && cur == e.set
}

// verify checks raw from scratch; st holds what a cached verdict needs:
// nbf, iat, and the key set that verified raw when its issuer's keys are
// fetched.
func (v *Verifier) verify(ctx context.Context, raw string, role Role) (_ *Token, st *verifyState, _ error) {
	if !isCompact(raw) {
		return nil, nil, withHint(KindMalformed, HintNotCompact, invalid("not a compact JWS"))
	}
	if v.legacy != nil && isLegacyType(raw) {
		return v.verifyLegacy(ctx, raw, role)
	}
	v.verifies.Add(1)
	st = &verifyState{role: role}
	opts := make([]jwt.ParseOption, 0, len(v.parseOpts)+1)
	opts = append(opts, v.parseOpts...)
	opts = append(opts, jwt.WithKeyProvider(jws.KeyProviderFunc(func(_ context.Context, sink jws.KeySink, sig *jws.Signature, msg *jws.Message) error {
		return v.fetchKeys(ctx, st, sink, sig, msg)
	})))
	tok, err := jwt.ParseString(raw, opts...)
	if err != nil {
		return nil, nil, st.parseFailure(err)
	}
	// Checked once the signature holds, so that a forged token costs no
	// more than before; and on the very text that jwx verified and
	// decoded, which the key provider kept.
	if err := checkClaims(st.payload); err != nil {
		return nil, nil, withHint(KindMalformed, HintClaims, invalid("claims: %v", err))
	}
	// The key set was chosen from our own reading of "iss", by
	// encoding/json, which matches member names case-insensitively; make
	// sure jwx, which does not, read the same value.
	iss, _ := tok.Issuer()
	if st.issuer == "" || iss != st.issuer {
		return nil, nil, withKind(KindIssuer, invalid("iss %q differs from the key issuer %q", iss, st.issuer))
	}
	exp, ok := tok.Expiration()
	if !ok {
		return nil, nil, withHint(KindMalformed, HintNoExp, invalid("missing exp"))
	}
	// jwx ignores exp when it equals the Unix epoch; check it ourselves.
	if !v.now().Before(exp.Add(v.leeway)) {
		return nil, nil, withKind(KindExpired, invalid("expired at %v", exp))
	}
	t := &Token{Issuer: iss, Expiry: exp}
	if err := claimStrings(tok, t); err != nil {
		return nil, nil, err
	}
	if tok.Has(claimDetails) {
		var rawDetails json.RawMessage
		if err := tok.Get(claimDetails, &rawDetails); err != nil {
			return nil, nil, withHint(KindMalformed, HintDetails, invalid("%s: %v", claimDetails, err))
		}
		if t.Details, err = v.ParseDetails(rawDetails); err != nil {
			return nil, nil, withHint(KindMalformed, HintDetails, err)
		}
	}
	st.nbf, _ = tok.NotBefore()
	st.iat, _ = tok.IssuedAt()
	return t, st, nil
}

// fetchKeys checks the protected header and hands the trusted keys that fit
// it to sink.
func (v *Verifier) fetchKeys(ctx context.Context, st *verifyState, sink jws.KeySink, sig *jws.Signature, msg *jws.Message) error {
	h, alg, err := v.checkHeader(st, sig)
	if err != nil {
		return err
	}
	// The payload is not verified yet: "iss" only selects the key set, and
	// Verify checks it again once the signature holds.
	st.payload = msg.Payload()
	typ, _ := h.Type()
	if normalType(typ) != "at+jwt" {
		if hasLegacyClaim(st.payload) {
			return st.refuse(KindLegacyClaim, "", "typ %q and a legacy mercure claim", typ)
		}
		return st.refuse(KindType, "", "typ %q is not at+jwt", typ)
	}
	var claims struct {
		Iss *string `json:"iss"`
	}
	if err := json.Unmarshal(st.payload, &claims); err != nil {
		return st.refuse(KindMalformed, HintJSON, "payload: %v", err)
	}
	if claims.Iss == nil {
		return st.refuse(KindIssuer, HintNoIssuer, "missing iss")
	}
	ik, ok := v.issuers[*claims.Iss]
	if !ok {
		return st.refuse(KindIssuer, "", "unknown issuer %q", *claims.Iss)
	}
	st.issuer = ik.id
	kid, hasKid := h.KeyID()
	keys := ik.keys[st.role]
	if ik.src != nil {
		if keys, st.set, err = ik.dynamicCandidates(ctx, kid, hasKid); err != nil {
			return st.refuse(KindOther, HintKeysUnavailable, "%v", err)
		}
	}
	if !offerKeys(sink, keys, alg, kid, hasKid) {
		return st.refuse(KindSignature, HintNoKey, "no %s key of issuer %q fits alg %s kid %q", st.role, ik.id, alg, kid)
	}
	return nil
}

// checkHeader checks what the protected header of any token must hold,
// and returns it with its allowed algorithm.
func (v *Verifier) checkHeader(st *verifyState, sig *jws.Signature) (jws.Headers, jwa.SignatureAlgorithm, error) {
	var none jwa.SignatureAlgorithm
	st.calls++
	if st.calls > 1 {
		return nil, none, st.refuse(KindMalformed, HintStructure, "nested or multi-signature token")
	}
	if h := sig.PublicHeaders(); h != nil && len(h.Keys()) > 0 {
		return nil, none, st.refuse(KindMalformed, HintStructure, "unprotected header")
	}
	h := sig.ProtectedHeaders()
	if h == nil {
		return nil, none, st.refuse(KindMalformed, HintStructure, "no protected header")
	}
	if h.Has(jws.CriticalKey) {
		return nil, none, st.refuse(KindMalformed, HintCrit, "crit header present")
	}
	if h.Has("b64") {
		return nil, none, st.refuse(KindMalformed, HintCrit, "b64 header present")
	}
	a, ok := h.Algorithm()
	if !ok {
		return nil, none, st.refuse(KindAlgorithm, "", "missing alg")
	}
	alg, ok := v.allowed[a.String()]
	if !ok {
		return nil, none, st.refuse(KindAlgorithm, "", "alg %q not allowed", a.String())
	}
	return h, alg, nil
}

// offerKeys hands to sink the candidates that may verify alg, and the kid
// when the header names one; it reports whether there was any.
func offerKeys(sink jws.KeySink, keys []candidate, alg jwa.SignatureAlgorithm, kid string, hasKid bool) bool {
	n := 0
	for i := range keys {
		c := &keys[i]
		if hasKid && c.kid != "" && c.kid != kid {
			continue
		}
		if !c.fits(alg.String()) {
			continue
		}
		sink.Key(alg, c.raw)
		n++
	}
	return n > 0
}

// normalType lowercases a typ header and drops an application/ prefix
// (AUTH-19).
func normalType(typ string) string {
	return strings.TrimPrefix(strings.ToLower(typ), "application/")
}

// claimStrings reads the string claims sub, jti, sid and client_id into t.
func claimStrings(tok jwt.Token, t *Token) error {
	t.Subject, _ = tok.Subject()
	t.JTI, _ = tok.JwtID()
	if tok.Has("sid") {
		if err := tok.Get("sid", &t.Session); err != nil {
			return withHint(KindMalformed, HintClaims, invalid("sid: %v", err))
		}
	}
	if tok.Has("client_id") {
		if err := tok.Get("client_id", &t.ClientID); err != nil {
			return withHint(KindMalformed, HintClaims, invalid("client_id: %v", err))
		}
	}
	return nil
}

// parseFailure classifies an error of jwt.Parse: the key provider's
// refusal when it refused, else what jwx found.
func (st *verifyState) parseFailure(err error) error {
	if st.fail != nil {
		return st.fail
	}
	err = invalid("%w", err)
	switch {
	case errors.Is(err, jws.VerificationError()):
		return withKind(KindSignature, err)
	case errors.Is(err, jwt.TokenExpiredError()):
		return withKind(KindExpired, err)
	case errors.Is(err, jwt.TokenNotYetValidError()), errors.Is(err, jwt.InvalidIssuedAtError()):
		return withKind(KindNotYetValid, err)
	case errors.Is(err, jwt.InvalidAudienceError()):
		return withKind(KindAudience, err)
	case errors.Is(err, jwt.InvalidIssuerError()):
		return withKind(KindIssuer, err)
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return withHint(KindMalformed, HintNoExp, err) // iss is checked before
	}
	// The claims did not decode (a date that is no number, say).
	return withHint(KindMalformed, HintClaims, err)
}

// ParseDetails parses the value of an authorization_details claim and
// returns its Mercure details, enforcing the limits of v. Elements of other
// types are ignored, but every element must be a JSON object. No member
// name may repeat in a Mercure detail or in one of its topic matchers, nor
// may "type" in any element.
func (v *Verifier) ParseDetails(raw json.RawMessage) ([]Detail, error) {
	raw = trimJSON(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, invalid("%s is not an array", claimDetails)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, invalid("%s: %v", claimDetails, err)
	}
	var out []Detail
	for i, e := range elems {
		obj, dups, err := object(e)
		if err != nil {
			return nil, invalid("%s[%d]: %v", claimDetails, i, err)
		}
		// The type decides whether the rest is read at all: a detail that
		// names two may be ours to one reader and foreign to another.
		if slices.Contains(dups, "type") {
			return nil, invalid("%s[%d]: duplicate member \"type\"", claimDetails, i)
		}
		t, ok := obj["type"]
		if !ok || len(t) == 0 || t[0] != '"' {
			continue // not a Mercure detail
		}
		var typ string
		if err := json.Unmarshal(t, &typ); err != nil || typ != DetailType {
			// Foreign details are opaque: nothing but their type is read,
			// so their duplicates cannot make us read something else.
			continue
		}
		if len(dups) > 0 {
			return nil, invalid("%s[%d]: duplicate member %q", claimDetails, i, dups[0])
		}
		if len(out) == v.maxDetails {
			return nil, invalid("more than %d Mercure details", v.maxDetails)
		}
		d, err := v.parseDetail(obj)
		if err != nil {
			return nil, invalid("%s[%d]: %v", claimDetails, i, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// trimJSON removes JSON whitespace (bytes.TrimSpace also strips \v, \f
// and Unicode spaces, which JSON does not allow).
func trimJSON(b []byte) []byte {
	return bytes.Trim(b, " \t\n\r")
}

// object decodes a JSON object into its members. Names are matched
// exactly (encoding/json struct decoding would fold case) and unescaped as
// encoding/json does. A name given more than once keeps its last value and
// is listed in dups: the caller decides whether that is an error, which
// decoding into a map could not tell it. The values alias raw.
func object(raw json.RawMessage) (m map[string]json.RawMessage, dups []string, err error) {
	s := scanner{b: raw}
	s.ws()
	if s.i == len(s.b) || s.b[s.i] != '{' {
		return nil, nil, errors.New("not an object")
	}
	m = make(map[string]json.RawMessage)
	err = s.object(func(name, value []byte) error {
		k := string(name)
		if _, dup := m[k]; dup {
			dups = append(dups, k)
		}
		m[k] = value
		return nil
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, nil, err
	}
	return m, dups, nil
}

// array decodes a non-empty JSON array.
func array(raw json.RawMessage, name string) ([]json.RawMessage, error) {
	raw = trimJSON(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, fmt.Errorf("%s is not an array", name)
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(a) == 0 {
		return nil, fmt.Errorf("%s is empty", name)
	}
	return a, nil
}

// str decodes a JSON string (null is not a string).
func str(raw json.RawMessage, name string) (string, error) {
	raw = trimJSON(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", fmt.Errorf("%s is not a string", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

func (v *Verifier) parseDetail(obj map[string]json.RawMessage) (Detail, error) {
	var d Detail
	actions, err := array(obj["actions"], "actions")
	if err != nil {
		return d, err
	}
	for j, a := range actions {
		s, err := str(a, fmt.Sprintf("actions[%d]", j))
		if err != nil {
			return d, err
		}
		switch s {
		case "publish":
			d.Publish = true
		case "subscribe":
			d.Subscribe = true
		}
	}
	topics, err := array(obj["topics"], "topics")
	if err != nil {
		return d, err
	}
	if len(topics) > v.maxTopics {
		return d, fmt.Errorf("more than %d topics", v.maxTopics)
	}
	d.Topics = make([]Matcher, 0, len(topics))
	for j, t := range topics {
		m, err := v.parseMatcher(t)
		if err != nil {
			return d, fmt.Errorf("topics[%d]: %w", j, err)
		}
		d.Topics = append(d.Topics, m)
	}
	if p, ok := obj["payload"]; ok {
		p = trimJSON(p)
		if len(p) == 0 || p[0] != '{' {
			return d, errors.New("payload is not an object")
		}
		d.Payload = append(json.RawMessage(nil), p...)
	}
	return d, nil
}

func (v *Verifier) parseMatcher(raw json.RawMessage) (Matcher, error) {
	obj, dups, err := object(raw)
	if err != nil {
		return Matcher{}, err
	}
	if len(dups) > 0 {
		return Matcher{}, fmt.Errorf("duplicate member %q", dups[0])
	}
	m := Matcher{Type: MatchExact}
	rm, ok := obj["match"]
	if !ok {
		return m, errors.New("missing match")
	}
	if m.Match, err = str(rm, "match"); err != nil {
		return m, err
	}
	if m.Match == "" {
		return m, errors.New("empty match")
	}
	if !chars.Valid(m.Match) {
		// TOP-1: no topic holds these characters, so such a grant can only
		// be a mistake or an attack on whoever compares grants as strings.
		return m, errors.New("match holds invalid UTF-8, control or format characters")
	}
	if len(m.Match) > v.maxMatchBytes {
		return m, fmt.Errorf("match of %d bytes exceeds %d", len(m.Match), v.maxMatchBytes)
	}
	if rt, ok := obj["match_type"]; ok {
		if m.Type, err = str(rt, "match_type"); err != nil {
			return m, err
		}
	}
	if m.Match == MatchAll {
		// MAT-4, AUTH-40: the wildcard is recognized before the type.
		return m, nil
	}
	if m.Type != MatchExact && m.Type != MatchURLPattern {
		return m, fmt.Errorf("unsupported match_type %q", m.Type)
	}
	if v.checkMatcher != nil {
		if err := v.check(m); err != nil {
			return m, fmt.Errorf("%s matcher: %w", m.Type, err)
		}
	}
	return m, nil
}

func (v *Verifier) check(m Matcher) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return v.checkMatcher(m.Type, m.Match)
}

// Kinds of verification failures, stable names for metrics (see
// [Reason]). Those about the header and the claims' shape (algorithm,
// type, legacy_claim, issuer, malformed) are found before the signature
// is checked; expired, not_yet_valid and audience only once it holds.
const (
	KindMalformed   = "malformed"     // not a compact JWS, bad JSON, crit, a required claim missing, invalid details
	KindSignature   = "signature"     // no trusted key fits, or the signature does not verify
	KindAlgorithm   = "algorithm"     // alg missing or not allowed
	KindType        = "type"          // typ is not at+jwt
	KindLegacyClaim = "legacy_claim"  // a pre-standard token (typ JWT, mercure claim) where none is accepted
	KindExpired     = "expired"       // exp passed
	KindNotYetValid = "not_yet_valid" // nbf or iat in the future
	KindAudience    = "audience"      // aud missing or without the resource
	KindIssuer      = "issuer"        // iss missing or not trusted
	KindOther       = "other"         // anything else (the issuer's keys unavailable, ...)
)

// Hints: fixed phrases that refine a kind, for the client.
const (
	HintNotCompact      = "it is not a compact JWS (three base64url parts)"
	HintTooLarge        = "it is longer than the hub accepts"
	HintStructure       = "its JWS structure is not a single signature with a protected header"
	HintCrit            = "its header has crit or b64, which the hub does not support"
	HintJSON            = "its claims are not a JSON object"
	HintClaims          = "a claim is repeated or of the wrong type (exp, nbf and iat are numbers of seconds)"
	HintNoExp           = "exp is missing"
	HintNoIssuer        = "iss is missing"
	HintDetails         = "its authorization_details are invalid or over the hub's limits"
	HintLegacyClaim     = "its mercure claim is invalid or over the hub's limits"
	HintLegacyDetails   = "authorization_details need typ at+jwt"
	HintNoKey           = "no key the hub trusts for this issuer and endpoint fits its kid and alg"
	HintKeysUnavailable = "the keys of its issuer are not available yet"
)

// kindError tags a verification error with its kind and a hint, its
// message unchanged.
type kindError struct {
	error
	kind, hint string
}

func (e kindError) Unwrap() error { return e.error }

func withKind(kind string, err error) error { return kindError{err, kind, ""} }

func withHint(kind, hint string, err error) error { return kindError{err, kind, hint} }

// Reason classifies an error of VerifyContext: one of the Kind constants.
// It never looks at the token.
func Reason(err error) string {
	var k kindError
	if errors.As(err, &k) {
		return k.kind
	}
	return KindOther
}

// Hint returns the fixed phrase that refines the kind of err, or "".
func Hint(err error) string {
	var k kindError
	if errors.As(err, &k) {
		return k.hint
	}
	return ""
}
