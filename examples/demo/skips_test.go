package main

import (
	"os"
	"testing"

	"github.com/mercurekit/mercure/storetest"
)

// TestMain says, once the tests ran, how many skipped for want of
// Chromium, and closes the Chromium the browser tests shared.
func TestMain(m *testing.M) {
	code := storetest.ReportSkips("examples/demo", m).Run()
	chrome.Close()
	os.Exit(code)
}
