package mercure_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
)

// The first refusal of each reason is logged at Warn with the description
// the client got, the following ones of that reason at Debug: one
// reason's first Warn does not silence another's (issue 22). Nothing of
// the token reaches the log.
func TestAUTH14_FirstRefusalOfEachReasonWarns(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	th := startAuthHub(t, mercure.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	claims := func(mod func(map[string]any)) map[string]any {
		c := authClaims(detail("publish", exactTopic("*")))
		mod(c)
		return c
	}
	at := map[string]any{"alg": "ES256", "typ": "at+jwt"}
	tokens := map[mercure.TokenFailure]string{
		mercure.TokenMalformed:   "not-a-jws",
		mercure.TokenSignature:   mintToken(t, authOtherKey, nil, claims(func(map[string]any) {})),
		mercure.TokenAlgorithm:   mintToken(t, authPubKey, map[string]any{"alg": "RS512", "typ": "at+jwt"}, claims(func(map[string]any) {})),
		mercure.TokenType:        mintToken(t, authPubKey, map[string]any{"alg": "ES256", "typ": "JWT"}, claims(func(map[string]any) {})),
		mercure.TokenLegacyClaim: symfonyToken(t, legacyPublisherSecret, `{"publish":["*"]}`),
		mercure.TokenExpired:     mintToken(t, authPubKey, at, claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })),
		mercure.TokenNotYetValid: mintToken(t, authPubKey, at, claims(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() })),
		mercure.TokenAudience:    mintToken(t, authPubKey, at, claims(func(c map[string]any) { c["aud"] = "https://other.example" })),
		mercure.TokenIssuer:      mintToken(t, authPubKey, at, claims(func(c map[string]any) { c["iss"] = "https://unknown.example" })),
		mercure.TokenGrants:      pubToken(t, detail("publish", exactTopic("https://example.com/other"))),
	}
	described := map[mercure.TokenFailure]string{} // reason → the challenge's error_description
	for round := range 3 {
		for reason, tok := range tokens {
			status, _, hdr := th.request(http.MethodPost, "", form("topic", "https://example.com/books/1", "data", "x"), "Authorization", "Bearer "+tok)
			m := descriptionValue.FindStringSubmatch(hdr.Get("WWW-Authenticate"))
			if status/100 != 4 || m == nil {
				t.Fatalf("%s: %d %q", reason, status, hdr.Get("WWW-Authenticate"))
			}
			if round == 0 {
				described[reason] = m[1]
			}
		}
	}
	type record struct {
		Level, Msg, Reason, Description string
	}
	warns, debugs := map[mercure.TokenFailure][]record{}, map[mercure.TokenFailure]int{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		line := sc.Text()
		for _, tok := range tokens {
			if len(tok) > 20 && strings.Contains(line, tok) {
				t.Fatalf("a token reached the log: %s", line)
			}
		}
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if r.Msg != "mercure: access refused" {
			continue
		}
		switch r.Level {
		case "WARN":
			warns[mercure.TokenFailure(r.Reason)] = append(warns[mercure.TokenFailure(r.Reason)], r)
		case "DEBUG":
			debugs[mercure.TokenFailure(r.Reason)]++
		default:
			t.Errorf("a refusal logged at %s: %s", r.Level, line)
		}
	}
	for reason := range tokens {
		if w := warns[reason]; len(w) != 1 || w[0].Description != described[reason] {
			t.Errorf("%s: warnings %+v, want one with the description %q", reason, w, described[reason])
		}
		if debugs[reason] != 2 {
			t.Errorf("%s: %d debug records, want the 2 refusals after the first", reason, debugs[reason])
		}
	}
}
