package store_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"
)

func TestEventJSONRoundTrip(t *testing.T) {
	retry := 3 * time.Second
	full := store.Event{
		Topics:  []string{"https://example.com/a", "urn:b"},
		Data:    "x\ny",
		Private: true,
		ID:      "urn:uuid:1",
		Type:    "t",
		Retry:   &retry,
	}
	bare := store.Event{Topics: []string{"urn:c"}, ID: "even"}
	at := time.Unix(0, 1_700_000_000_123_456_789)
	for _, when := range []time.Time{at, {}} {
		for _, e := range []store.Event{full, bare} {
			e.Time = when
			b, _, err := store.MarshalEvent(&e)
			if err != nil {
				t.Fatal(err)
			}
			got := store.Event{Seq: 7, Time: time.Now(), Retry: new(time.Duration)}
			if err := store.UnmarshalEvent(b, &got); err != nil {
				t.Fatal(err)
			}
			e.Seq = 7 // left as it was
			if !got.Time.Equal(e.Time) {
				t.Fatalf("time %v decoded from %s, want %v", got.Time, b, e.Time)
			}
			got.Time = e.Time
			if !reflect.DeepEqual(got, e) {
				t.Fatalf("got %+v from %s, want %+v", got, b, e)
			}
		}
	}
}

// The digest ignores the time and tells any other field apart, as
// SameUpdate does.
func TestMarshalEventDigest(t *testing.T) {
	retry := time.Second
	u := store.Event{Topics: []string{"a", "b"}, Data: "d", Private: true, ID: "i", Type: "y", Retry: &retry}
	at := time.Unix(0, 1_700_000_000_123_456_789)
	seen := map[[32]byte]string{}
	variants := map[string]store.Event{
		"full":    u,
		"topics":  {Topics: []string{"b", "a"}, Data: "d", Private: true, ID: "i", Type: "y", Retry: &retry},
		"data":    {Topics: u.Topics, Data: "e", Private: true, ID: "i", Type: "y", Retry: &retry},
		"private": {Topics: u.Topics, Data: "d", ID: "i", Type: "y", Retry: &retry},
		"id":      {Topics: u.Topics, Data: "d", Private: true, ID: "j", Type: "y", Retry: &retry},
		"type":    {Topics: u.Topics, Data: "d", Private: true, ID: "i", Retry: &retry},
		"retry":   {Topics: u.Topics, Data: "d", Private: true, ID: "i", Type: "y"},
	}
	for name, v := range variants {
		for _, when := range []time.Time{at, at.Add(time.Hour), {}} {
			v.Time = when
			_, d, err := store.MarshalEvent(&v)
			if err != nil {
				t.Fatal(err)
			}
			if other, ok := seen[d]; ok && other != name {
				t.Fatalf("%s and %s have the same digest", name, other)
			}
			seen[d] = name
		}
		full := variants["full"]
		if same := v.SameUpdate(&full); same != (name == "full") {
			t.Fatalf("%s: SameUpdate(full) = %v", name, same)
		}
	}
	if len(seen) != 7 {
		t.Fatalf("%d digests for 7 updates at 3 times each, want 7", len(seen))
	}
}
