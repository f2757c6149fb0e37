// Package testwait is the one way the module's tests wait for something
// that happens on other goroutines or in other processes (a stream to
// end, a server to come back, a metric to move): they poll a condition
// until it holds, and fail saying what they waited for when it does not.
//
// A test waits on the awaited thing, never for a fixed time. Inside a
// testing/synctest bubble the polling sleeps pass on the bubble's clock,
// so a wait there costs no real time; but a bubble's tests should prefer
// synctest.Wait where the awaited thing is a goroutine blocking.
package testwait

import (
	"flag"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Deadline is how long For waits before it fails the test: long enough
// that only something that will not happen reaches it, on a loaded
// machine and under the race detector.
const Deadline = 30 * time.Second

// For polls cond until it reports true. It fails t with t.Fatalf, naming
// what, once Deadline has passed, so it must be called from the test's
// own goroutine. It polls often at first (what it waits for is usually
// a few scheduling rounds away), then every 20 ms.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Within(Deadline, cond) {
		t.Fatalf("timed out after %v waiting for %s", Deadline, what)
	}
}

// Within polls cond until it reports true or d has passed, and reports
// whether it held: for goroutines other than the test's, and for the
// callers that say more than For when the wait fails.
func Within(d time.Duration, cond func() bool) bool {
	start := time.Now()
	for pause := 100 * time.Microsecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Since(start) > d {
			return false
		}
		time.Sleep(pause)
	}
	return true
}

// Parallel lets n parallel tests of the package run at once, unless the
// command line says otherwise (-parallel): for packages whose tests
// mostly wait on other processes (servers restarting, a browser), which
// the default, GOMAXPROCS, would run a couple at a time on a small
// machine. Call it from TestMain, before m.Run.
func Parallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// AtOnce runs each of cases as t's subtest of its name, all at once, and
// returns when they have ended: side by side, but on t's own slot among
// the package's parallel tests. As parallel subtests they would wait for
// t to return and then queue for a slot behind every parallel test of
// the package not started yet; for subtests that spend their time
// waiting (a stall grace, an outage mended), the package's run would end
// that much later.
func AtOnce(t *testing.T, cases map[string]func(t *testing.T)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		wg.Go(func() { t.Run(name, cases[name]) })
	}
	wg.Wait()
}
