package main

import (
	"os"
	"testing"

	"github.com/mercurekit/mercure/storetest"
)

// What some of these tests need beside Redis and PostgreSQL (see
// redistest.Want, pgtest.Want, browsertest.Want): programs, which .ci/run
// installs.
var (
	wantPrometheus = storetest.Want{What: "prometheus",
		How: "install it (Debian package prometheus); MERCURE_TEST_PROMETHEUS=1 makes its absence a failure"}
	wantPHP = storetest.Want{What: "PHP with Symfony's Mercure component",
		How: "install them (Debian packages php-cli php-symfony-mercure); MERCURE_TEST_PHP=1 makes their absence a failure"}
)

// TestMain says, once the tests ran, how many skipped for want of each
// of these, and closes the Chromium the browser tests shared.
//
// The parallel tests (the browser tests, Prometheus, Redis outages)
// spend their time waiting, for Chromium, for reconnections and for
// other processes, rather than computing: unless -parallel says
// otherwise, up to 8 of them run at once, not GOMAXPROCS (2 on a
// 2-core machine, which ran them two by two).
//
// Run with MERCURE_STANDALONE_PROCESS=1, the test binary is a hub: the
// command itself, with its flags (see hubProcess).
func TestMain(m *testing.M) {
	if os.Getenv(hubProcessEnv) == "1" {
		main()
		os.Exit(0)
	}
	storetest.Parallel(8) // the browser tests wait on Chromium, not on a CPU
	code := storetest.ReportSkips("examples/standalone", m).Run()
	chrome.Close()
	os.Exit(code)
}
