package token

import (
	"encoding/json"
	"strings"
	"testing"
)

// AUTH-41: payload selection, in array order, by the subscription's
// matcher string taken as a topic.
func TestPayload(t *testing.T) {
	// A stand-in for URL pattern matching: ":id" matches one segment,
	// including the literal ":id" of a subscription's own pattern.
	matches := func(m Matcher, topic string) bool {
		if m.Type == MatchExact {
			return m.Match == topic
		}
		prefix, _, _ := strings.Cut(m.Match, ":id")
		return strings.HasPrefix(topic, prefix) && !strings.Contains(topic[len(prefix):], "/")
	}
	p := func(s string) json.RawMessage { return json.RawMessage(s) }
	details := []Detail{
		{Publish: true, Topics: []Matcher{{Type: MatchExact, Match: "https://example.com/orders/1"}}, Payload: p(`{"skip":"publish only"}`)},
		{Subscribe: true, Topics: []Matcher{{Type: MatchExact, Match: "https://example.com/orders/1"}}, Payload: p(`{"n":1}`)},
		{Subscribe: true, Topics: []Matcher{{Type: MatchURLPattern, Match: "https://example.com/orders/:id"}}, Payload: p(`{"n":2}`)},
		{Subscribe: true, Topics: []Matcher{{Type: MatchExact, Match: MatchAll}}, Payload: p(`{"n":"fallback"}`)},
	}
	cases := map[string]string{
		"https://example.com/orders/1":   `{"n":1}`, // exact detail comes first
		"https://example.com/orders/:id": `{"n":2}`, // a pattern string matched as a topic
		"https://example.com/orders/7":   `{"n":2}`,
		"urn:other":                      `{"n":"fallback"}`, // "*" is the fallback
	}
	for sub, want := range cases {
		if got := string(Payload(details, sub, matches)); got != want {
			t.Errorf("Payload(%q) = %s, want %s", sub, got, want)
		}
	}
	// The first matching detail wins even without a payload: a broad entry
	// listed first hides the ones behind it (AUTH-42).
	if got := Payload(append([]Detail{{Subscribe: true, Topics: []Matcher{{Match: MatchAll}}}}, details...), "urn:x", matches); got != nil {
		t.Errorf("got %s, want nil", got)
	}
}
