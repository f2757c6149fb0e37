package main

import (
	"os"
	"testing"

	"github.com/mercurekit/mercure/storetest"
)

// TestMain says, once the tests ran, how many skipped for want of a
// PostgreSQL server (MERCURE_TEST_POSTGRES).
func TestMain(m *testing.M) {
	os.Exit(storetest.ReportSkips("examples/pgtasks", m).Run())
}
