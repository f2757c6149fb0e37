package redistest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/storetest"
)

// A cluster client writes again by itself once a replica has taken over
// the slot of the killed primary, and the replica has every write that a
// WAIT saw replicated; the old primary, restarted, comes back as a
// replica of the new one.
func TestCluster_Failover(t *testing.T) {
	t.Parallel()
	long(t)
	c := redistest.StartCluster(t)
	rdb := c.Client()
	ctx := context.Background()
	const key = "{mercure}"
	for _, k := range []string{key, "{mercure}:ids", "mercure", "a{b}c", "a{}b", "}{x}"} {
		if got, err := rdb.ClusterKeySlot(ctx, k).Result(); err != nil || int(got) != redistest.Slot(k) {
			t.Errorf("CLUSTER KEYSLOT %s: %d %v, Slot says %d", k, got, err, redistest.Slot(k))
		}
	}
	// WAIT counts the replicas that have the connection's last write: on
	// the primary's own client, not a cluster client that may send the
	// keyless WAIT to another node.
	primary, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n := setAndWait(t, primary, key, 1, storetest.Deadline); n != 1 {
		t.Fatalf("WAIT 1: %d replicas", n)
	}

	old := c.KillPrimaryFor(key)
	killed := time.Now()
	attempts := writeAgain(t, func(ctx context.Context) error { return rdb.Set(ctx, key+":after", "1", 0).Err() })
	t.Logf("Cluster: first write %.1f s after the primary's kill (%d attempts)", time.Since(killed).Seconds(), attempts)

	p := c.WaitFailover(key, old)
	if p == old {
		t.Fatal("the killed primary is the primary again")
	}
	if c.PrimaryFor(key) != p {
		t.Fatalf("PrimaryFor after the failover: not %s", p.Addr)
	}
	for _, k := range []string{key, key + ":after"} {
		if v, err := rdb.Get(ctx, k).Result(); err != nil || v != "1" {
			t.Errorf("%s after the failover: %q %v, want 1", k, v, err)
		}
	}

	old.Start()
	c.WaitSettled()
	if f := old.Client().Info(ctx, "replication").Val(); !strings.Contains(f, "role:slave") {
		t.Fatalf("the restarted primary:\n%s\nwant a replica", f)
	}
}

// A replica stalled by Stall lacks the writes that its primary
// acknowledged meanwhile; it takes over the slot without them once the
// primary dies.
func TestCluster_StalledReplicaLosesWrites(t *testing.T) {
	t.Parallel()
	long(t)
	c := redistest.StartCluster(t)
	rdb := c.Client()
	ctx := context.Background()
	const key = "{mercure}"
	primary, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n := setAndWait(t, primary, key, 1, storetest.Deadline); n != 1 {
		t.Fatalf("WAIT 1: %d replicas", n)
	}
	replicas := c.ReplicasFor(key)
	if len(replicas) != 1 {
		t.Fatalf("%d replicas of the primary of %s, want 1", len(replicas), key)
	}
	replica := replicas[0]
	release := replica.Stall()
	if n := setAndWait(t, primary, key+":lost", 1, 100*time.Millisecond); n != 0 {
		t.Fatalf("WAIT 1 with the replica stalled: %d replicas, want 0", n)
	}
	old := c.KillPrimaryFor(key)
	killed := time.Now()
	release()
	attempts := writeAgain(t, func(ctx context.Context) error { return rdb.Set(ctx, key+":after", "1", 0).Err() })
	t.Logf("Cluster, stalled replica: first write %.1f s after the primary's kill (%d attempts)", time.Since(killed).Seconds(), attempts)
	if p := c.WaitFailover(key, old); p != replica {
		t.Fatalf("promoted %s, want the replica %s", p.Addr, replica.Addr)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "1" {
		t.Errorf("%s after the failover: %q %v, want 1", key, v, err)
	}
	if v, err := rdb.Get(ctx, key+":lost").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("%s:lost after the failover: %q %v, want it lost", key, v, err)
	}
}
