package eventjson_test

import (
	"testing"

	"github.com/mercurekit/mercure/internal/eventjson"
	"github.com/mercurekit/mercure/storetest"
)

func TestRoundTrip(t *testing.T) {
	for _, withTime := range []bool{true, false} {
		for _, id := range []string{"a", "even", "x\ny"} {
			e := storetest.NewEvent(id)
			if id == "even" {
				e.Retry, e.Type, e.Data = nil, "", ""
			}
			e.Seq = 7
			b, err := eventjson.Marshal(e, withTime)
			if err != nil {
				t.Fatal(err)
			}
			got, err := eventjson.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			got.Seq = e.Seq
			if !withTime {
				if !got.Time.IsZero() {
					t.Fatalf("time %v decoded from %s", got.Time, b)
				}
				got.Time = e.Time
			}
			if d := storetest.SameEvent(got, e); d != "" {
				t.Fatalf("withTime %v, %q: %s\n%s", withTime, id, d, b)
			}
		}
	}
}
