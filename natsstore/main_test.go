package natsstore_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/storetest"
)

// shared is the nats-server that the tests without a server of their
// own share, each on streams of its own; nil without MERCURE_TEST_NATS.
var shared *natstest.Shared

// TestMain starts the shared server, runs up to 8 parallel tests at
// once, checks that the stores' goroutines (feed, subscriptions writer)
// end with them, and says how many tests skipped for want of a
// nats-server (MERCURE_TEST_NATS).
func TestMain(m *testing.M) {
	if os.Getenv("MERCURE_FEEDCPU_PEER") != "" {
		os.Exit(m.Run()) // BenchmarkFeedCPU's other process: no server of its own
	}
	var err error
	if shared, err = natstest.StartShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	storetest.Parallel(8) // the parallel tests wait on servers, not on a CPU
	goleak.VerifyTestMain(stopping{storetest.ReportSkips("natsstore", m)})
}

// stopping runs the tests, then stops the shared server.
type stopping struct{ storetest.Runner }

func (s stopping) Run() int {
	defer func() {
		if shared != nil {
			shared.Stop()
		}
	}()
	return s.Runner.Run()
}
