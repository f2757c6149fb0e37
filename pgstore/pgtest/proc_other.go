//go:build !unix

package pgtest

import (
	"os/exec"
	"runtime"
	"testing"

	"github.com/mercurekit/mercure/storetest"
)

// owner is whom a server runs as, and who owns its directories (see
// credential): never anyone but the caller here, where no process runs
// as root.
type owner struct{ Uid, Gid uint32 }

// needSignals skips t, counting the skip for [storetest.ReportSkips]: a server of
// a test's own is stopped and killed with signals, which PostgreSQL
// understands on Unix systems only.
func needSignals(t testing.TB) {
	t.Helper()
	storetest.Skip(t, storetest.Want{What: "Unix signals to stop a PostgreSQL server of the test's own",
		How: "run them on a Unix system, not " + runtime.GOOS})
}

func runAs(*exec.Cmd, *owner) {}

// alive reports every process as running: without signals, a cluster
// left over is never taken for one whose server ended.
func alive(int) bool { return true }

// crash is never called: needSignals skipped the tests that start a
// server.
func crash(*Server) {}
