package mercure

import (
	"testing"

	"github.com/mercurekit/mercure/internal/index"
)

// Streams whose grant sets have equal keys share rights: the key must be
// one-to-one, whatever the strings in the tokens.
func TestGrantSetKeyIsOneToOne(t *testing.T) {
	t.Parallel()
	exact := func(v string) matcher { return matcher{kind: index.Exact, typ: MatchExact, value: v} }
	wild := matcher{kind: index.Wildcard, typ: "anything", value: "*"}
	sets := [][]matcher{
		{exact("x"), exact("y")},
		{exact("x\x00y")},
		{exact("x"), exact("y"), exact("")},
		{exact("1:x")},
		{exact("1"), exact("x")},
		{wild},
		{exact("*")},
		{matcher{kind: index.Wildcard, typ: "other", value: "*"}, exact("z")},
	}
	seen := map[string]int{}
	for i, ms := range sets {
		k := newGrantSet(ms).key
		if j, dup := seen[k]; dup {
			t.Fatalf("sets %d and %d share the key %q", j, i, k)
		}
		seen[k] = i
	}
	if newGrantSet([]matcher{wild}).key != newGrantSet([]matcher{{kind: index.Wildcard, typ: "other", value: "*"}}).key {
		t.Error("two * grants differing only by their type string should share a set")
	}
}
