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
