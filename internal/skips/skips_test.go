package skips

import (
	"bytes"
	"testing"
)

var (
	redis = Want{What: "a Redis server", How: "set MERCURE_TEST_REDIS=host:port"}
	pg    = Want{What: "a PostgreSQL server", How: "set MERCURE_TEST_POSTGRES=DSN"}
)

// The report comes once, after the tests ran, a line per Want with its
// count (subtests included) and how to run them; the exit code is the
// tests'.
func TestReport(t *testing.T) {
	counts = tally{} // -count=N runs this again
	for _, w := range []Want{redis, pg, redis} {
		t.Run(w.What, func(t *testing.T) {
			Skip(t, w)
			t.Error("Skip returned")
		})
	}
	var out bytes.Buffer
	ranBefore := false
	code := reporting{m: mFunc(func() int { ranBefore = out.Len() == 0; return 3 }), pkg: "store", out: &out}.Run()
	want := "store: 1 test skipped for want of a PostgreSQL server; to run it, set MERCURE_TEST_POSTGRES=DSN\n" +
		"store: 2 tests skipped for want of a Redis server; to run them, set MERCURE_TEST_REDIS=host:port\n"
	if got := out.String(); got != want || !ranBefore || code != 3 {
		t.Errorf("report %q (after the tests: %v), code %d; want %q after the tests, code 3", got, ranBefore, code, want)
	}
}

// Nothing skipped, nothing said.
func TestReport_Silent(t *testing.T) {
	var c tally
	var out bytes.Buffer
	c.write(&out, "store")
	if out.Len() != 0 {
		t.Errorf("report %q, want none", out.String())
	}
}

type mFunc func() int

func (f mFunc) Run() int { return f() }
