package storetest

import (
	"testing"

	"github.com/mercurekit/mercure/internal/skips"
)

// A Want is what tests skipped for want of something the environment
// lacks (a server named by a variable, a program), and how to provide it.
// [ReportSkips] says, once the tests ran, how many skipped and what would
// run them: otherwise go test ./... passes a package whose every store
// test skipped as "ok", without a word.
type Want struct {
	// What names it, after "for want of": "a Redis server".
	What string
	// How says how to provide it: "set MERCURE_TEST_REDIS=host:port
	// (such as localhost:6399)".
	How string
}

// Skip skips t for want of w, and counts the skip for [ReportSkips].
func Skip(t testing.TB, w Want) {
	t.Helper()
	skips.Skip(t, skips.Want(w))
}

// Runner is what a TestMain runs: *testing.M, or what ReportSkips
// returns (goleak.VerifyTestMain takes either).
type Runner interface{ Run() int }

// ReportSkips wraps the m of a TestMain so that, once the tests ran, a line on
// stderr says, for each [Want], how many tests of package pkg skipped for
// want of it (the skips of this test binary, this package's own and those
// of the harnesses it uses):
//
//	pgstore: 34 tests skipped for want of a PostgreSQL server; to run them, set MERCURE_TEST_POSTGRES=...
//
// go test shows it with -v, or when run in the package's directory
// without arguments; go test ./... hides what a passing package prints.
func ReportSkips(pkg string, m Runner) Runner { return skips.Report(pkg, m) }
