package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/store"
)

// Failover is what [RunFailover] needs of the servers of a replicated
// store: a primary with replicas, one of which takes over when it dies.
type Failover struct {
	// Open returns a store on the servers, with connections of its own,
	// that follows their primary; every store Open returns shares one
	// history, which keeps at least a few thousand events.
	Open func(t *testing.T) store.Store
	// KillPrimary stops the primary as a crash does (SIGKILL). A replica
	// takes over: by itself (Sentinel, Redis Cluster), or promoted as an
	// operator's tooling would (a PostgreSQL standby), which KillPrimary
	// does before it returns.
	KillPrimary func(t *testing.T)
	// Lag, if not nil, makes the replica that KillPrimary will have take
	// over stop receiving the primary's writes, so that the failover
	// loses them, unless the stores wait for that replica (Durable):
	// then appends fail until it has taken over. RunFailover calls it a
	// sixth of the way through, and KillPrimary once every hub has sent
	// an update since (and, unless Durable, at a third).
	Lag func(t *testing.T)
	// Durable tells whether the stores acknowledge an update only once
	// the replica that takes over has it (redisstore.WithReplicas,
	// PostgreSQL's synchronous replication).
	Durable bool
}

// FailoverResult is what one run of [RunFailover] measured.
type FailoverResult struct {
	// Acknowledged counts the updates the hubs acknowledged, Lost those
	// of them the store no longer holds.
	Acknowledged, Lost int
	// Gaps counts the resumes the hubs answered with another cursor
	// than the one asked for (the streams told of a gap), Vanished the
	// events and positions the streams received that the failover lost.
	Gaps, Vanished int
	// Recovery is the time from the primary's death to the first update
	// acknowledged after it.
	Recovery time.Duration
}

// String formats r as one line of the table of docs/clusters.md.
func (r FailoverResult) String() string {
	return fmt.Sprintf("acknowledged %d, lost %d, duplicated 0, streams told of a gap %d, vanished %d, recovered in %.1f s",
		r.Acknowledged, r.Lost, r.Gaps, r.Vanished, r.Recovery.Seconds())
}

// RunFailover runs a store's primary failing under traffic, and returns
// what it measured (logged too). Three hubs, each on a store of its own,
// publish, sending each update again (same id) until a hub acknowledges
// it; streams are open on each hub, resuming with Last-Event-ID when a
// hub ends them. A third of the way through, the primary is killed and a
// replica takes over. Then:
//
//   - the store holds every update once; with Durable, every update
//     acknowledged, without it the lost ones are counted;
//   - every stream got each update of the store after its start once, in
//     the store's order, or was told of a gap by the resume that
//     followed: an update it got that the failover lost, or a position
//     the hub gave it that was lost, came before a resume answered with
//     another cursor (earliest, for a lost one);
//   - streams opened without Last-Event-ID after the failover start at a
//     position the store holds, and get every update after it.
//
// Each hub must publish again within the deadlines of package testwait:
// the store must follow the new primary by itself.
func RunFailover(t *testing.T, f *Failover) FailoverResult {
	topic := fmt.Sprintf("https://example.com/failover/%d", clusterN.Add(1))
	var hubs []*clusterHub
	for _, name := range []string{"a", "b", "c"} {
		hubs = append(hubs, newClusterHub(t, name, closing(t, f.Open(t))))
	}
	var fs []*follower
	for i := range 6 {
		fs = append(fs, follow(t, hubs[i%3].srv.URL, topic, ""))
	}
	for _, f := range fs {
		f.waitPosition(t)
	}
	const perHub = 60
	var acked sync.Map // update id → true
	var begun, published atomic.Int64
	var killed atomic.Pointer[time.Time]
	var recovered atomic.Pointer[time.Time]
	var wg sync.WaitGroup
	for _, h := range hubs {
		wg.Go(func() {
			for i := range perHub {
				id := fmt.Sprintf("%s/%s%d", topic, h.name, i)
				began := time.Now()
				begun.Add(1)
				h.publish(t, topic, mercure.Update{ID: id, Data: "x"})
				// Recovered once an update sent after the kill is
				// acknowledged, not one the old primary took just before.
				if k := killed.Load(); k != nil && began.After(*k) {
					now := time.Now()
					recovered.CompareAndSwap(nil, &now)
				}
				acked.Store(id, true)
				published.Add(1)
				time.Sleep(5 * time.Millisecond) // pacing: the traffic spans the failover
			}
		})
	}
	if f.Lag != nil {
		testwait.For(t, "a sixth of the updates", func() bool { return published.Load() >= int64(len(hubs)*perHub/6) })
		f.Lag(t)
		mark := begun.Load()
		testwait.For(t, "updates sent to the primary whose replica lags", func() bool { return begun.Load() >= mark+int64(len(hubs)) })
	}
	if !f.Durable || f.Lag == nil {
		// (Durable stores acknowledge nothing while the replica lags.)
		testwait.For(t, "a third of the updates", func() bool { return published.Load() >= int64(len(hubs)*perHub/3) })
	}
	start := time.Now()
	killed.Store(&start)
	f.KillPrimary(t)
	wg.Wait()
	var r FailoverResult
	if p := recovered.Load(); p != nil {
		r.Recovery = p.Sub(start)
	}
	// Streams opened after the failover start at a position the store
	// holds: the hubs went back with the history.
	for i := range 3 {
		fs = append(fs, follow(t, hubs[i].srv.URL, topic, ""))
	}
	for _, f := range fs[6:] {
		f.waitPosition(t)
	}
	end := topic + "/end"
	hubs[0].publish(t, topic, mercure.Update{ID: end, Data: "end"})
	acked.Store(end, true)
	reached(t, end, fs...)
	for _, f := range fs {
		f.close()
	}
	order, ids := storeOrder(t, hubs[1].store, topic)
	held := map[string]bool{}
	for _, id := range ids {
		held[id] = true
	}
	acked.Range(func(id, _ any) bool {
		r.Acknowledged++
		if !held[id.(string)] {
			r.Lost++
			if f.Durable {
				t.Errorf("update %s was acknowledged, and lost", id)
			}
		}
		return true
	})
	sum := checkFollowers(t, order, end, fs...)
	r.Gaps, r.Vanished = sum.Gaps, sum.Vanished
	t.Logf("failover: %v", r)
	return r
}
