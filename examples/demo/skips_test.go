package main

import (
	"os"
	"testing"

	"github.com/mercurekit/mercure/internal/skips"
)

// wantChromium is what the browser tests need; .ci/run installs it.
var wantChromium = skips.Want{What: "Chromium", How: "install it (Debian package chromium)"}

// TestMain says, once the tests ran, how many skipped for want of
// Chromium, and closes the Chromium the browser tests shared.
func TestMain(m *testing.M) {
	code := skips.Report("examples/demo", m).Run()
	closeBrowser()
	os.Exit(code)
}
