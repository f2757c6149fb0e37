package storetest

import (
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/loopback"
	"github.com/mercurekit/mercure/internal/testwait"
)

// What a store's tests need to run against real servers, as the suites
// do: waits on the thing awaited, loopback ports for servers that restart,
// and a TCP link to cut (see [Proxy]).

// Deadline is how long the suites wait for what should happen before
// they fail: long enough that only something that will not happen reaches
// it, on a loaded machine and under the race detector.
const Deadline = testwait.Deadline

// WaitFor polls cond until it reports true, and fails t naming what once
// [Deadline] has passed, so it must be called from the test's goroutine.
// Inside a testing/synctest bubble its pauses pass on the bubble's clock.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}

// Within polls cond until it reports true or d has passed, and reports
// whether it held: for goroutines other than the test's, and for the
// callers that say more than [WaitFor] when the wait fails.
func Within(d time.Duration, cond func() bool) bool { return testwait.Within(d, cond) }

// Parallel lets n parallel tests of the package run at once, unless the
// command line says otherwise (-parallel): for packages whose tests
// mostly wait on servers restarting, which the default, GOMAXPROCS, would
// run a couple at a time on a small machine. Call it from TestMain,
// before m.Run.
func Parallel(n int) { testwait.Parallel(n) }

// Port returns a free loopback port (127.0.0.1) for a server to listen
// on, and again after a restart; it fails t when it finds none. The port
// lies below the kernel's ephemeral range, which the local ports of
// outgoing connections come from: once a port from that range is
// released, any connection may take it before the server listens again.
func Port(t testing.TB) int {
	t.Helper()
	return loopback.Port(t)
}

// Addr returns "127.0.0.1:" and a port from [Port].
func Addr(t testing.TB) string {
	t.Helper()
	return loopback.Addr(t)
}
