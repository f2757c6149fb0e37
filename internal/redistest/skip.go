package redistest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
)

// Env names the variable that holds the address of the Redis server the
// tests may use, such as localhost:6399. Without it the Redis tests skip.
const Env = "MERCURE_TEST_REDIS"

// skipped counts the tests of this test binary that skipped for want of
// Env.
var skipped atomic.Int64

// Addr returns the address named by MERCURE_TEST_REDIS, or skips t, and
// counts the skip for [ReportSkips].
func Addr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(Env)
	if addr == "" {
		skipped.Add(1)
		t.Skip("set " + Env + "=host:port (e.g. localhost:6399) to run the Redis tests")
	}
	return addr
}

// TestingM is what a TestMain runs: *testing.M, or what ReportSkips
// returns (goleak.VerifyTestMain takes either).
type TestingM interface{ Run() int }

type reporting struct {
	m   TestingM
	pkg string
}

func (r reporting) Run() int {
	code := r.m.Run()
	if n := skipped.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d %s skipped: set %s=host:port to run them against a real Redis\n", r.pkg, n, Tests(n), Env)
	}
	return code
}

// ReportSkips wraps the m of a TestMain so that, once the tests ran, the
// number of tests skipped for want of MERCURE_TEST_REDIS is printed on
// stderr, as "pkg: N tests skipped: ...". The go command shows it with
// -v, or when run in the package's directory without arguments.
func ReportSkips(pkg string, m TestingM) TestingM { return reporting{m, pkg} }

// Tests returns "test" or "tests", as n requires.
func Tests(n int64) string {
	if n == 1 {
		return "test"
	}
	return "tests"
}
