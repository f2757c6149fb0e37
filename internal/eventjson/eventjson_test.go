package eventjson_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/eventjson"
)

func TestRoundTrip(t *testing.T) {
	retry := 3 * time.Second
	full := eventjson.Update{
		Topics:  []string{"https://example.com/a", "urn:b"},
		Data:    "x\ny",
		Private: true,
		ID:      "urn:uuid:1",
		Type:    "t",
		Retry:   &retry,
	}
	bare := eventjson.Update{Topics: []string{"urn:c"}, ID: "even"}
	at := time.Unix(0, 1_700_000_000_123_456_789)
	for _, when := range []time.Time{at, {}} {
		for _, u := range []eventjson.Update{full, bare} {
			b, err := eventjson.Marshal(u, when)
			if err != nil {
				t.Fatal(err)
			}
			got, gotAt, err := eventjson.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if !gotAt.Equal(when) {
				t.Fatalf("time %v decoded from %s, want %v", gotAt, b, when)
			}
			if !reflect.DeepEqual(got, u) {
				t.Fatalf("got %+v from %s, want %+v", got, b, u)
			}
		}
	}
}

// MarshalDigest writes what Marshal does; its digest ignores the time and
// tells any other field apart.
func TestMarshalDigest(t *testing.T) {
	retry := time.Second
	u := eventjson.Update{Topics: []string{"a", "b"}, Data: "d", Private: true, ID: "i", Type: "y", Retry: &retry}
	at := time.Unix(0, 1_700_000_000_123_456_789)
	seen := map[[32]byte]string{}
	for name, v := range map[string]eventjson.Update{
		"full":    u,
		"topics":  {Topics: []string{"b", "a"}, Data: "d", Private: true, ID: "i", Type: "y", Retry: &retry},
		"data":    {Topics: u.Topics, Data: "e", Private: true, ID: "i", Type: "y", Retry: &retry},
		"private": {Topics: u.Topics, Data: "d", ID: "i", Type: "y", Retry: &retry},
		"id":      {Topics: u.Topics, Data: "d", Private: true, ID: "j", Type: "y", Retry: &retry},
		"type":    {Topics: u.Topics, Data: "d", Private: true, ID: "i", Retry: &retry},
		"retry":   {Topics: u.Topics, Data: "d", Private: true, ID: "i", Type: "y"},
	} {
		for _, when := range []time.Time{at, at.Add(time.Hour), {}} {
			b, d, err := eventjson.MarshalDigest(v, when)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := eventjson.Marshal(v, when)
			if string(b) != string(want) {
				t.Fatalf("%s: MarshalDigest wrote %s, Marshal %s", name, b, want)
			}
			if other, ok := seen[d]; ok && other != name {
				t.Fatalf("%s and %s have the same digest", name, other)
			}
			seen[d] = name
		}
	}
	if len(seen) != 7 {
		t.Fatalf("%d digests for 7 updates at 3 times each, want 7", len(seen))
	}
}
