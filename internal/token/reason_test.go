package token

import (
	"strings"
	"testing"
)

// wantReasons is the reason every refused case of the table gets: exact,
// so that a valid signature on a refused shape is never counted as a bad
// signature.
var wantReasons = map[string]string{
	"JSON serialization":                    KindMalformed,
	"JWE compact":                           KindMalformed,
	"too long":                              KindMalformed,
	"whitespace":                            KindMalformed,
	"tampered payload":                      KindSignature,
	"typ JWT":                               KindType,
	"typ missing":                           KindType,
	"typ at+jwt;x":                          KindType,
	"typ application/jwt":                   KindType,
	"alg none":                              KindAlgorithm,
	"alg not allowed (RS512)":               KindAlgorithm,
	"header ES384 on ES256 signature":       KindSignature,
	"HS256 with RSA public key as secret":   KindSignature,
	"HS256 with RSA public key, no kid":     KindSignature,
	"key alg RS256, header PS256":           KindSignature,
	"key use enc":                           KindSignature,
	"attacker key in jwk header":            KindSignature,
	"attacker jku header, no kid":           KindSignature,
	"unknown kid":                           KindSignature,
	"iss B signed by A":                     KindSignature,
	"iss A signed by B":                     KindSignature,
	"unknown iss":                           KindIssuer,
	"missing iss":                           KindIssuer,
	"publisher key for subscriber":          KindSignature,
	"subscriber key for publisher":          KindSignature,
	"crit header":                           KindMalformed,
	"b64 true header":                       KindMalformed,
	"b64 false in crit":                     KindMalformed,
	"exp missing":                           KindMalformed,
	"exp 0":                                 KindExpired,
	"exp past leeway":                       KindExpired,
	"exp not a number":                      KindMalformed,
	"nbf future":                            KindNotYetValid,
	"iat future":                            KindNotYetValid,
	"aud wrong":                             KindAudience,
	"aud array without resource":            KindAudience,
	"aud missing":                           KindAudience,
	"client_id not a string":                KindMalformed,
	"details object":                        KindMalformed,
	"details null":                          KindMalformed,
	"details element not object":            KindMalformed,
	"actions missing":                       KindMalformed,
	"actions empty":                         KindMalformed,
	"actions null element":                  KindMalformed,
	"actions number element":                KindMalformed,
	"actions null":                          KindMalformed,
	"topics missing":                        KindMalformed,
	"topics empty":                          KindMalformed,
	"topics null element":                   KindMalformed,
	"topics string element":                 KindMalformed,
	"match missing":                         KindMalformed,
	"match null":                            KindMalformed,
	"match empty":                           KindMalformed,
	"match_type unknown":                    KindMalformed,
	"match_type wrong case":                 KindMalformed,
	"match_type null":                       KindMalformed,
	"payload string":                        KindMalformed,
	"payload null":                          KindMalformed,
	"payload array":                         KindMalformed,
	"too many details":                      KindMalformed,
	"too many topics":                       KindMalformed,
	"match too long":                        KindMalformed,
	"CheckMatcher rejects":                  KindMalformed,
	"CheckMatcher panics":                   KindMalformed,
	"one bad detail among good ones":        KindMalformed,
	"exp RFC 3339 string":                   KindMalformed,
	"exp numeric string":                    KindMalformed,
	"nbf RFC 3339 string":                   KindMalformed,
	"nbf numeric string":                    KindMalformed,
	"iat RFC 3339 string":                   KindMalformed,
	"iat numeric string":                    KindMalformed,
	"exp string under an escaped name":      KindMalformed,
	"nbf negative":                          KindMalformed,
	"iat negative":                          KindMalformed,
	"nbf far before 1970":                   KindMalformed,
	"exp after year 9999":                   KindMalformed,
	"exp 1e18":                              KindMalformed,
	"duplicate iss, same value":             KindMalformed,
	"duplicate iss, other value first":      KindMalformed,
	"duplicate iss, escaped name":           KindMalformed,
	"duplicate exp":                         KindMalformed,
	"duplicate aud":                         KindMalformed,
	"duplicate sub":                         KindMalformed,
	"duplicate client_id":                   KindMalformed,
	"duplicate authorization_details":       KindMalformed,
	"duplicate unknown claim":               KindMalformed,
	"duplicate actions in a Mercure detail": KindMalformed,
	"duplicate topics in a Mercure detail":  KindMalformed,
	"duplicate payload in a Mercure detail": KindMalformed,
	"duplicate type, Mercure first":         KindMalformed,
	"duplicate type, Mercure last":          KindMalformed,
	"duplicate type in a foreign detail":    KindMalformed,
	"duplicate member, escaped name, in a Mercure detail": KindMalformed,
	"duplicate match in a matcher":                        KindMalformed,
	"duplicate match_type in a matcher":                   KindMalformed,
}

func TestVerifyReasons(t *testing.T) {
	v := newTestVerifier(t)
	for _, c := range tableCases() {
		if c.valid {
			continue
		}
		want, ok := wantReasons[c.name]
		if !ok {
			t.Errorf("case %q has no expected reason", c.name)
			continue
		}
		raw := c.token(t)
		_, err := v.Verify(raw, c.role)
		if got := Reason(err); got != want {
			t.Errorf("%s: reason %q, want %q (%v)", c.name, got, want, err)
		}
		if want == KindMalformed && Hint(err) == "" {
			t.Errorf("%s: malformed without a hint", c.name)
		}
		// Reason and hint are shown to clients: nothing of the token.
		for _, part := range strings.Split(raw, ".") {
			if len(part) > 8 && strings.Contains(Reason(err)+Hint(err), part) {
				t.Errorf("%s: the description repeats the token", c.name)
			}
		}
	}
}

// A pre-standard token where none is accepted says so, rather than being
// taken for a forgery: its signature may well be valid.
func TestVerifyLegacyClaimWithoutLegacy(t *testing.T) {
	v := newTestVerifier(t)
	for name, c := range map[string]struct {
		hdr    map[string]any
		claims map[string]any
		want   string
	}{
		"Symfony's token":           {map[string]any{"typ": "JWT", "alg": "HS256"}, map[string]any{"exp": testNow.Unix() + 60, "mercure": map[string]any{"publish": []any{"*"}, "subscribe": []any{}}}, KindLegacyClaim},
		"no typ, namespaced claim":  {map[string]any{"alg": "HS256"}, map[string]any{"https://mercure.rocks/": map[string]any{"publish": []any{"*"}}}, KindLegacyClaim},
		"typ JWT, no mercure claim": {map[string]any{"typ": "JWT", "alg": "HS256"}, map[string]any{"iss": issA, "exp": testNow.Unix() + 60}, KindType},
	} {
		_, err := v.Verify(mint(t, "HS256", fx.hs32, c.hdr, c.claims, nil), Publisher)
		if got := Reason(err); got != c.want {
			t.Errorf("%s: %q, want %q (%v)", name, got, c.want, err)
		}
	}
}
