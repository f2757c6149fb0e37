package token

import "encoding/json"

// Payload selects the payload of a subscription (AUTH-41): the payload of
// the first detail, in array order, whose actions include subscribe and one
// of whose topics matches the subscription's own matcher string taken as a
// topic. matches tells whether a grant matcher selects a topic (exact:
// byte equality; urlpattern: the pattern resolved against the hub URL;
// "*": always). It returns nil when no such detail has a payload.
func Payload(details []Detail, subscription string, matches func(m Matcher, topic string) bool) json.RawMessage {
	for _, d := range details {
		if !d.Subscribe {
			continue
		}
		for _, m := range d.Topics {
			if m.MatchesAll() || matches(m, subscription) {
				return d.Payload // the first matching detail wins, payload or not
			}
		}
	}
	return nil
}
