package token

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzVerify feeds raw tokens, and header/payload pairs that it signs with
// a trusted HS256 key (so that mutations reach the claim checks), to
// Verify. Accepted tokens must satisfy the invariants.
func FuzzVerify(f *testing.F) {
	v := newTestVerifier(f)
	for _, c := range tableCases() {
		raw := c.token(f)
		parts := strings.Split(raw, ".")
		hdr, pl := []byte("{}"), []byte("{}")
		if len(parts) == 3 {
			if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err == nil {
				hdr = b
			}
			if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
				pl = b
			}
		}
		f.Add(raw, hdr, pl, uint8(c.role))
	}
	f.Fuzz(func(t *testing.T, raw string, hdr, payload []byte, role uint8) {
		check := func(raw string) {
			tok, err := v.Verify(raw, Role(role%3))
			if err != nil {
				if !errors.Is(err, ErrInvalid) || tok != nil {
					t.Fatalf("err %v, tok %v", err, tok)
				}
				return
			}
			checkInvariants(t, v, tok)
			checkAudience(t, raw)
		}
		check(raw)
		input := b64(hdr) + "." + b64(payload)
		check(input + "." + b64(signRaw(t, "HS256", fx.hs32, input)))
	})
}

// checkAudience asserts that the payload's aud contains the resource.
func checkAudience(t *testing.T, raw string) {
	t.Helper()
	parts := strings.Split(raw, ".")
	pl, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("accepted payload not base64url: %v", err)
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(pl, &claims); err != nil {
		t.Fatalf("accepted payload: %v", err)
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil && one == testResource {
		return
	}
	var many []string
	if json.Unmarshal(claims.Aud, &many) == nil {
		for _, a := range many {
			if a == testResource {
				return
			}
		}
	}
	t.Fatalf("accepted aud %s", claims.Aud)
}

// FuzzDetails feeds authorization_details values to ParseDetails.
func FuzzDetails(f *testing.F) {
	v := newTestVerifier(f)
	for _, c := range tableCases() {
		cl := defaultClaims()
		if c.claims != nil {
			c.claims(cl)
		}
		if d, ok := cl["authorization_details"]; ok {
			f.Add(mustJSON(f, d))
		}
	}
	f.Add([]byte(`[{"type":"` + DetailType + `","actions":["subscribe"],"topics":[{"match":"*","match_type":"x"}],"payload":{}}]`))
	f.Add([]byte(`[{"type":"` + DetailType + `","type":"other","actions":[],"topics":[]}]`))
	f.Add([]byte(` [ ] `))
	f.Fuzz(func(t *testing.T, data []byte) {
		ds, err := v.ParseDetails(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || ds != nil {
				t.Fatalf("err %v, details %v", err, ds)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if len(ds) > v.maxDetails {
			t.Fatalf("%d details", len(ds))
		}
		for _, d := range ds {
			checkDetail(t, v, d)
		}
	})
}
