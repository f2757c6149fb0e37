package main

import (
	"os"
	"testing"

	"github.com/mercurekit/mercure/internal/skips"
)

// TestMain says, once the tests ran, how many skipped for want of
// Chromium, and closes the Chromium the browser tests shared.
func TestMain(m *testing.M) {
	code := skips.Report("examples/demo", m).Run()
	chrome.Close()
	os.Exit(code)
}
