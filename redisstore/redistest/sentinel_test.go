package redistest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/storetest"
)

// A client through the sentinels writes again by itself once they have
// promoted the replica in place of the killed primary, which has every
// write that a WAIT saw replicated; the old primary, restarted, comes
// back as a replica of the new one.
func TestSentinel_Failover(t *testing.T) {
	t.Parallel()
	long(t)
	s := redistest.StartSentinel(t, 1)
	rdb := s.Client()
	ctx := context.Background()
	if n := setAndWait(t, rdb, "kept", 1, storetest.Deadline); n != 1 {
		t.Fatalf("WAIT 1: %d replicas", n)
	}

	old := s.KillPrimary()
	killed := time.Now()
	attempts := writeAgain(t, func(ctx context.Context) error { return rdb.Set(ctx, "after", "1", 0).Err() })
	t.Logf("Sentinel: first write %.1f s after the primary's kill (%d attempts)", time.Since(killed).Seconds(), attempts)

	p := s.WaitFailover(old)
	if p == old {
		t.Fatal("the killed primary is the primary again")
	}
	for _, key := range []string{"kept", "after"} {
		if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "1" {
			t.Errorf("%s after the failover: %q %v, want 1", key, v, err)
		}
	}

	old.Start()
	s.WaitReplicas(1)
	if got := s.Replicas(); len(got) != 1 || got[0] != old {
		t.Fatalf("replicas after the restart: %v, want the old primary", got)
	}
}

// A replica stalled by Stall lacks the writes that the primary
// acknowledged meanwhile; preferred by the sentinels, it is promoted
// without them once the primary dies: the failover loses them, as
// asynchronous replication allows.
func TestSentinel_StalledReplicaLosesWrites(t *testing.T) {
	t.Parallel()
	long(t)
	s := redistest.StartSentinel(t, 2)
	r := s.Replicas()[0]
	s.Prefer(r)
	rdb := s.Client()
	ctx := context.Background()
	if n := setAndWait(t, rdb, "kept", 2, storetest.Deadline); n != 2 {
		t.Fatalf("WAIT 2: %d replicas", n)
	}

	release := r.Stall()
	// The other replica acknowledges the write; the stalled one holds it.
	if n := setAndWait(t, rdb, "lost", 1, storetest.Deadline); n != 1 {
		t.Fatalf("WAIT 1 with a replica stalled: %d replicas", n)
	}
	if v, err := r.Client().Get(ctx, "lost").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("lost on the stalled replica: %q %v, want none", v, err)
	}
	old := s.KillPrimary()
	killed := time.Now()
	release()
	attempts := writeAgain(t, func(ctx context.Context) error { return rdb.Set(ctx, "after", "1", 0).Err() })
	t.Logf("Sentinel, stalled replica: first write %.1f s after the primary's kill (%d attempts)", time.Since(killed).Seconds(), attempts)

	if p := s.WaitFailover(old); p != r {
		t.Fatalf("promoted %s, want the preferred %s", p.Addr, r.Addr)
	}
	if v, err := rdb.Get(ctx, "kept").Result(); err != nil || v != "1" {
		t.Errorf("kept after the failover: %q %v, want 1", v, err)
	}
	if v, err := rdb.Get(ctx, "lost").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("lost after the failover: %q %v, want it lost", v, err)
	}
}

// long skips t with -short: a failover takes seconds.
func long(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a failover takes seconds")
	}
}

// setAndWait sets key to 1 and returns how many replicas have it once n
// do or timeout has passed (WAIT), on one connection: WAIT counts the
// replicas that have the connection's own last write.
func setAndWait(t *testing.T, rdb redis.UniversalClient, key string, n int, timeout time.Duration) int {
	t.Helper()
	var wait *redis.Cmd
	_, err := rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		p.Set(context.Background(), key, "1", 0)
		wait = p.Do(context.Background(), "WAIT", n, timeout.Milliseconds())
		return nil
	})
	got, err2 := wait.Int()
	if err != nil || err2 != nil {
		t.Fatalf("SET %s, WAIT %d: %v", key, n, errors.Join(err, err2))
	}
	return got
}

// writeAgain calls write, each call bounded by a second, until one
// succeeds, and returns how many calls it took; it fails t after
// storetest.Deadline.
func writeAgain(t *testing.T, write func(context.Context) error) int {
	t.Helper()
	attempts := 0
	var err error
	if !storetest.Within(storetest.Deadline, func() bool {
		attempts++
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = write(ctx)
		return err == nil
	}) {
		t.Fatalf("no write within %v after the kill: %v", storetest.Deadline, err)
	}
	return attempts
}
