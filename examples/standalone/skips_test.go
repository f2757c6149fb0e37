package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/mercurekit/mercure/internal/redistest"
)

// prometheusSkips counts the tests skipped because the prometheus binary
// is missing.
var prometheusSkips atomic.Int64

// TestMain says, once the tests ran, how many were skipped for want of
// Redis (MERCURE_TEST_REDIS) or of a prometheus binary.
func TestMain(m *testing.M) {
	code := redistest.ReportSkips("examples/standalone", m).Run()
	if n := prometheusSkips.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "examples/standalone: %d %s skipped: install prometheus (Debian package prometheus) to run them; MERCURE_TEST_PROMETHEUS=1 makes its absence a failure\n", n, redistest.Tests(n))
	}
	os.Exit(code)
}
