package natsstore_test

import (
	"testing"
	"time"

	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

// failoverTimeout bounds each call of the failover suite's stores, as
// redisstore's do: an append that a stream without a quorum cannot
// acknowledge fails within it, and the publisher sends it again.
const failoverTimeout = 2 * time.Second

// TestFailover runs storetest.RunFailover on a cluster of three
// nats-servers, the stream and the buckets replicated on all three
// (WithReplicas(3)): the server leading the stream is killed, and the two
// others elect a new leader by themselves (Raft). JetStream acknowledges
// an append once a majority has it, and a majority must vote for a new
// leader, which it does only for a replica holding every entry the
// majority has: nothing acknowledged is lost (Durable).
//
// Lag cannot make the replica that takes over lag while the other does
// not: a replica that lags cannot win an election against one that
// voted for every acknowledged append. Pausing one follower changes
// nothing (the leader and the other follower still acknowledge, and the
// other takes over). So there are two runs:
//
//   - Kill: Lag is nil; the leader is killed under traffic.
//   - FollowersPaused: Lag stops both followers (SIGSTOP): nothing is
//     acknowledged meanwhile, the appends fail, and the leader's
//     unacknowledged appends die with it; KillPrimary kills the leader
//     and lets the followers go on (SIGCONT). Redis Sentinel's run with
//     WithReplicas(1) and both replicas lagging is the same case.
//
// The stores follow the new leader by themselves: their connections go
// to another server of the URL list (nats.go), and a stream's leader
// answers wherever it is.
func TestFailover(t *testing.T) {
	t.Parallel()
	for _, paused := range []bool{false, true} {
		t.Run(map[bool]string{false: "Kill", true: "FollowersPaused"}[paused], func(t *testing.T) {
			t.Parallel()
			ss := natstest.StartCluster(t)
			const name = "failover"
			admin := natstest.Connect(t, ss...)
			var leader *natstest.Server
			var stopped []*natstest.Server
			f := &storetest.Failover{
				Open: func(t *testing.T) store.Store {
					return openOn(t, dial(t, natstest.URLs(ss...)), name,
						natsstore.WithReplicas(3), natsstore.WithTimeout(failoverTimeout))
				},
				KillPrimary: func(t *testing.T) {
					if leader == nil {
						leader = natstest.Leader(t, admin, name, ss...)
					}
					leader.Kill()
					for _, s := range stopped {
						s.Resume(t)
					}
					t.Logf("killed %s, the stream's leader", leader.Name)
				},
				Durable: true,
			}
			if paused {
				f.Lag = func(t *testing.T) {
					leader = natstest.Leader(t, admin, name, ss...)
					for _, s := range ss {
						if s != leader {
							s.Pause(t)
							stopped = append(stopped, s)
						}
					}
				}
			}
			r := storetest.RunFailover(t, f)
			if r.Lost != 0 {
				t.Errorf("%d acknowledged updates lost", r.Lost)
			}
		})
	}
}
