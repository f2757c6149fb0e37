package eventjson_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/eventjson"
)

func TestRoundTrip(t *testing.T) {
	retry := 3 * time.Second
	full := eventjson.Event{
		Topics:  []string{"https://example.com/a", "urn:b"},
		Data:    "x\ny",
		Private: true,
		ID:      "urn:uuid:1",
		Type:    "t",
		Retry:   &retry,
		Time:    time.Unix(0, 1_700_000_000_123_456_789),
	}
	bare := eventjson.Event{Topics: []string{"urn:c"}, ID: "even", Time: full.Time}
	for _, withTime := range []bool{true, false} {
		for _, e := range []eventjson.Event{full, bare} {
			b, err := eventjson.Marshal(&e, withTime)
			if err != nil {
				t.Fatal(err)
			}
			got, err := eventjson.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			want := e
			if !withTime {
				want.Time = time.Time{}
			}
			if !got.Time.Equal(want.Time) {
				t.Fatalf("withTime %v: time %v decoded from %s, want %v", withTime, got.Time, b, want.Time)
			}
			got.Time, want.Time = time.Time{}, time.Time{}
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("withTime %v: got %+v from %s, want %+v", withTime, *got, b, want)
			}
		}
	}
}
