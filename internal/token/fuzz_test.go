package token

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
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
		checkNoDuplicates(t, data)
	})
}

// checkNoDuplicates asserts, reading accepted details with encoding/json's
// token API, that no element repeats "type" and that no Mercure detail,
// nor any of its topic matchers, repeats a member name.
func checkNoDuplicates(t *testing.T, data []byte) {
	t.Helper()
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		t.Fatalf("accepted details: %v", err)
	}
	for _, e := range elems {
		names, vals, _ := refMembers(e)
		var types []json.RawMessage
		for i, n := range names {
			if n == "type" {
				types = append(types, vals[i])
			}
		}
		if len(types) > 1 {
			t.Fatalf("accepted a repeated type in %s", e)
		}
		var typ string
		if len(types) == 0 || json.Unmarshal(types[0], &typ) != nil || typ != DetailType {
			continue
		}
		if d, ok := repeated(names); ok {
			t.Fatalf("accepted a repeated %q in %s", d, e)
		}
		for i, n := range names {
			if n != "topics" {
				continue
			}
			var topics []json.RawMessage
			if err := json.Unmarshal(vals[i], &topics); err != nil {
				t.Fatalf("accepted topics %s: %v", vals[i], err)
			}
			for _, m := range topics {
				mn, _, _ := refMembers(m)
				if d, ok := repeated(mn); ok {
					t.Fatalf("accepted a matcher repeating %q in %s", d, e)
				}
			}
		}
	}
}

// refMembers lists the members of the JSON object raw in order, read with
// encoding/json's token API; ok is false when raw is not a valid object.
func refMembers(raw []byte) (names []string, vals []json.RawMessage, ok bool) {
	if !json.Valid(raw) {
		return nil, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		names = append(names, tok.(string))
		vals = append(vals, v)
	}
	return names, vals, true
}

// repeated returns a name that occurs twice in names.
func repeated(names []string) (string, bool) {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return n, true
		}
		seen[n] = true
	}
	return "", false
}

// refCheckClaims is checkClaims written with encoding/json.
func refCheckClaims(data []byte) bool {
	names, vals, ok := refMembers(data)
	if _, dup := repeated(names); !ok || dup {
		return false
	}
	for i, n := range names {
		if n != "exp" && n != "nbf" && n != "iat" {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(vals[i]))
		dec.UseNumber()
		var x any
		if dec.Decode(&x) != nil {
			return false
		}
		num, ok := x.(json.Number)
		if !ok {
			return false
		}
		f, err := num.Float64()
		if err != nil || f < 0 || f > float64(maxNumericDate) {
			return false
		}
	}
	return true
}

// FuzzScanner compares the JSON scanner with encoding/json: what it
// accepts, the members object returns, and checkClaims' verdict.
func FuzzScanner(f *testing.F) {
	f.Add(mustJSON(f, defaultClaims()))
	f.Add([]byte(withMembers(nil, `"\u0069ss":"x"`)))
	f.Add([]byte(`{"exp":1.5e9,"nbf":-0,"iat":"1","a":{"a":1,"a":[true,false,null]}}`))
	f.Add([]byte(` {"a\"b":"\ud800","\u00e9":-0.0E+1,"\/":[]} `))
	f.Add([]byte(`{"a":"\u00","b":01,"c":1.,"d":tru}`))
	f.Add([]byte("{\"\xff\":1,\"\xfe\":2}"))
	f.Add([]byte(`[[[{"x":[{}]}]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := scanner{b: data}
		_, err := s.value()
		if err == nil {
			err = s.end()
		}
		if valid := json.Valid(data); (err == nil) != valid {
			t.Fatalf("scanner: %v, json.Valid: %v", err, valid)
		}
		if got, want := checkClaims(data) == nil, refCheckClaims(data); got != want {
			t.Fatalf("checkClaims accepts: %v, reference: %v", got, want)
		}
		m, dups, err := object(data)
		names, _, ok := refMembers(data)
		if (err == nil) != ok {
			t.Fatalf("object: %v, reference ok: %v", err, ok)
		}
		if !ok {
			return
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("object: %q, json.Unmarshal: %q", m, want)
		}
		if len(dups) != len(names)-len(want) {
			t.Fatalf("dups %q for names %q", dups, names)
		}
	})
}
