package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/redisstore"
	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/storetest"
	"github.com/redis/go-redis/v9"
)

// subscribers returns the subscriber ids that in's hub lists as
// subscribed to topic, or nil when listing fails.
func subscribers(in *instance) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	subs, err := in.hub.Subscriptions(ctx)
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range subs {
		if s.Match == topic && s.Active {
			ids = append(ids, s.Subscriber)
		}
	}
	slices.Sort(ids)
	return ids
}

// own returns the subscriber ids of in's own streams.
func own(t *testing.T, in *instance) []string {
	t.Helper()
	subs, err := in.hub.Subscriptions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range subs {
		ids = append(ids, s.Subscriber)
	}
	return ids
}

func waitSubscribers(t *testing.T, in *instance, what string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !storetest.Within(storetest.Deadline, func() bool { return slices.Equal(subscribers(in), want) }) {
		// What the hub lists, whole, tells a store that lost a write from
		// a stream that ended.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		subs, err := in.hub.Subscriptions(ctx)
		t.Fatalf("timed out after %v waiting for %s: want %q, the hub lists %+v (error %v), its stats %+v",
			storetest.Deadline, what, want, subs, err, in.hub.Metrics())
	}
}

// TestSharedSubscriptions checks that the subscriptions API of any
// instance lists the subscribers of all (ACT-12 across instances): they
// appear and disappear with their streams, they expire when their instance
// dies without a word, and they come back when Redis restarts empty.
func TestSharedSubscriptions(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, false)
	const ttl = time.Second
	a := newInstance(t, srv.Addr, "mercure", redisstore.WithSubscriptionTTL(ttl), redisstore.WithTimeout(time.Second))
	b := newInstance(t, srv.Addr, "mercure", redisstore.WithSubscriptionTTL(ttl), redisstore.WithTimeout(time.Second))

	onA := subscribe(t, a, "")
	subA := own(t, a)
	if len(subA) != 1 {
		t.Fatalf("instance A lists %q right after one subscription", subA)
	}
	waitSubscribers(t, b, "B to list A's subscriber", subA[0])

	subscribe(t, b, "")
	// B's own subscriber is listed at once (ACT-17). A's is listed too,
	// unless a loaded machine delayed A's refresh past the short TTL
	// (it is then written again within a third of it): wait for both.
	listed := subscribers(b)
	ownB := slices.DeleteFunc(slices.Clone(listed), func(id string) bool { return id == subA[0] })
	if len(ownB) != 1 {
		t.Fatalf("instance B lists %q right after its own subscription", listed)
	}
	both := []string{subA[0], ownB[0]}
	waitSubscribers(t, b, "B to list both", both...)
	waitSubscribers(t, a, "A to list both", both...)

	onA.Close()
	subB := slices.DeleteFunc(slices.Clone(both), func(id string) bool { return id == subA[0] })
	waitSubscribers(t, b, "B to drop A's ended subscriber", subB...)
	waitSubscribers(t, a, "A to drop its ended subscriber", subB...)

	// Redis restarts empty: each store writes its subscriptions again
	// within a third of the TTL. (First, both hubs have the three
	// subscription events: one appended after the restart would restart
	// the numbering, a gap, and the hubs would end their streams.)
	storetest.WaitFor(t, "the subscription events", func() bool {
		return a.hub.Metrics().Dispatched == 3 && b.hub.Metrics().Dispatched == 3
	})
	// And their appends have returned: the feeds may pass an entry before
	// its append's reply is read, and go-redis sends again a script whose
	// reply the restart cut, to the empty server, which records it anew
	// (as it should: the first was lost).
	storetest.WaitFor(t, "the appends to return", func() bool {
		return a.scripts.inFlight.Load() == 0 && b.scripts.inFlight.Load() == 0
	})
	srv.Restart()
	waitSubscribers(t, a, "A to list B's subscriber after the restart", subB...)

	// Instance B dies: its client is gone, its stream still open. A stops
	// listing its subscriber once the TTL has passed.
	b.rdb.Close()
	died := time.Now()
	waitSubscribers(t, a, "A to forget the dead instance's subscriber")
	if d := time.Since(died); d < ttl/2 {
		t.Fatalf("the dead instance's subscriptions vanished after %v, before their TTL %v", d, ttl)
	}
}

// TestSharedSubscriptionsWithdrawn: a store that closes withdraws its
// subscriptions at once, without waiting for them to expire.
func TestSharedSubscriptionsWithdrawn(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	a := newInstance(t, rdb.Options().Addr, key, redisstore.WithSubscriptionTTL(time.Minute))
	b := newInstance(t, rdb.Options().Addr, key)
	subscribe(t, a, "")
	waitSubscribers(t, b, "B to list A's subscriber", own(t, a)...)
	if err := a.store.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitSubscribers(t, b, "B to drop the closed instance's subscriber")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("withdrawn after %v", d)
	}
	if _, err := a.store.Subscriptions(context.Background()); err != redisstore.ErrClosed {
		t.Fatalf("Subscriptions after Close: %v", err)
	}
	var _ store.SubscriptionStore = a.store
}

// TestSharedSubscriptionsRewrittenAfterLoss: Redis restarts empty and the
// first write after it adds a subscription: the store notices that the
// others were lost with the hash and writes them again. The TTL is long,
// so that no refresh (which notices the loss as well) runs meanwhile, and
// the write must go through at its first attempt (a failed one rewrites
// everything anyway): the rewrite is that write's.
func TestSharedSubscriptionsRewrittenAfterLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, false)
	mk := func(rdb *redis.Client) *redisstore.Store {
		s := open(t, rdb, "m", redisstore.WithSubscriptionTTL(time.Minute))
		t.Cleanup(func() { s.Close() })
		return s
	}
	ids := func(s *redisstore.Store) []string {
		ids, _ := storetest.SubscriptionIDs(context.Background(), s)
		return ids
	}
	ctx := context.Background()
	rdbA := srv.Client()
	a, b := mk(rdbA), mk(srv.Client())
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("old", true)}); err != nil {
		t.Fatal(err)
	}
	if got := ids(b); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("B lists %q once A's update returned, want [old]", got)
	}
	srv.Restart()
	// A's client has left its connections to the killed server: the
	// ping that succeeds is on a new one, which the write takes next.
	storetest.WaitFor(t, "Redis to answer A's client", func() bool { return rdbA.Ping(ctx).Err() == nil })
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("new", true)}); err != nil {
		t.Fatalf("the first write after the restart: %v", err)
	}
	storetest.WaitFor(t, "B to list both", func() bool { return slices.Equal(ids(b), []string{"new", "old"}) })
}

// TestUpdateSubscriptionsFailsFast: while Redis is down, the update
// returns the write's error instead of waiting for its context; the
// change is kept and written once Redis is back.
func TestUpdateSubscriptionsFailsFast(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, false)
	a := open(t, srv.Client(), "m", redisstore.WithTimeout(time.Second))
	defer a.Close()
	b := open(t, srv.Client(), "m")
	defer b.Close()
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("s", true)}); err == nil {
		t.Fatal("UpdateSubscriptions succeeded with Redis down")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("UpdateSubscriptions took %v to fail", d)
	}
	srv.Start()
	storetest.WaitFor(t, "B to list the kept change", func() bool {
		subs, err := b.Subscriptions(context.Background())
		return err == nil && len(subs) == 1 && subs[0].ID == "s"
	})
}

// gateHook holds the next transaction that writes subscriptions until
// released, once armed.
type gateHook struct {
	armed            atomic.Bool
	reached, release chan struct{}
}

func (g *gateHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "hset" && g.armed.CompareAndSwap(true, false) {
				close(g.reached)
				<-g.release
				break
			}
		}
		return next(ctx, cmds)
	}
}

// active returns the change of the subscription id: added (on) with a
// document of the hub's, or removed.
func active(id string, on bool) store.Subscription {
	s := store.Subscription{ID: id, Active: on}
	if on {
		s.JSON, _ = json.Marshal(mercure.Subscription{ID: id, Type: "subscription", Active: on})
	}
	return s
}

// TestSharedSubscriptionsResyncDespiteConcurrentRemoval: the hash holding
// X vanished; a write of A and B recreates it while A is removed
// concurrently. The store must still notice that X was lost and rewrite
// it.
func TestSharedSubscriptionsResyncDespiteConcurrentRemoval(t *testing.T) {
	t.Parallel()
	admin, key := client(t)
	t.Cleanup(func() { admin.Del(context.Background(), key+":hubs") })
	rdb := redis.NewClient(redistest.Options(admin.Options().Addr))
	g := &gateHook{reached: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(g)
	const ttl = 600 * time.Millisecond
	a := open(t, rdb, key, redisstore.WithSubscriptionTTL(ttl))
	other := open(t, admin, key)
	t.Cleanup(func() { a.Close(); other.Close(); rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // past every wait below
	defer cancel()
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("X", true)}); err != nil {
		t.Fatal(err)
	}
	names, err := admin.SMembers(ctx, key+":hubs").Result()
	if err != nil || len(names) != 1 {
		t.Fatalf("stores sharing subscriptions: %q, %v", names, err)
	}
	hash := key + ":subs:" + names[0]
	t.Cleanup(func() { admin.Del(context.Background(), hash) })
	if err := admin.Del(ctx, hash).Err(); err != nil { // lost
		t.Fatal(err)
	}
	g.armed.Store(true)
	first := make(chan error, 1)
	go func() {
		first <- a.UpdateSubscriptions(ctx, []store.Subscription{active("A", true), active("B", true)})
	}()
	select {
	case <-g.reached:
	case <-ctx.Done():
		t.Fatal("the write of A and B never reached Redis")
	}
	second := make(chan error, 1)
	go func() { second <- a.UpdateSubscriptions(ctx, []store.Subscription{active("A", false)}) }()
	// The removal is recorded (a store lists its own subscriptions from
	// memory, where the change is made) while the first write is held.
	storetest.WaitFor(t, "the removal of A to be recorded", func() bool {
		subs, err := a.Subscriptions(ctx)
		if err != nil {
			return false
		}
		for _, s := range subs {
			if s.ID == "A" {
				return false
			}
		}
		return len(subs) == 2
	})
	close(g.release)
	if err := errors.Join(<-first, <-second); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, "the other store to list B and X", func() bool {
		ids, err := storetest.SubscriptionIDs(ctx, other)
		return err == nil && slices.Equal(ids, []string{"B", "X"})
	})
}

// TestSubscribeRightAfterRecovery: after an outage made the
// subscriptions writer back off, a new stream's subscription does not
// wait for that backoff once Redis is back: its change cuts the wait
// short, and the store rewrites its whole set. The writer's first backoff
// is made an hour long (the default is 50 ms, doubling up to 1 s): were
// it not cut short, the other store would not list the subscriptions
// within storetest.Deadline.
func TestSubscribeRightAfterRecovery(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, false)
	in := newInstance(t, srv.Addr, "mercure", redisstore.WithTimeout(100*time.Millisecond),
		redisstore.WithPresenceBackoff(time.Hour))
	other := open(t, srv.Client(), "mercure")
	t.Cleanup(func() { other.Close() })
	ctx := context.Background()
	// Redis is up, but 100 ms may not do beside CPU hogs: the change is
	// made again until a write takes it (each change wakes the writer).
	var err error
	if !storetest.Within(storetest.Deadline, func() bool {
		err = in.store.UpdateSubscriptions(ctx, []store.Subscription{active("X", true)})
		return err == nil
	}) {
		t.Fatal(err)
	}
	srv.Kill()
	// The write fails and the writer starts its wait: a change made from
	// now on wakes it (the wake is kept if it comes before the wait).
	if err := in.store.UpdateSubscriptions(ctx, []store.Subscription{active("Y", true)}); err == nil {
		t.Fatal("UpdateSubscriptions succeeded with Redis down")
	}
	srv.Start()
	subscribe(t, in, "")
	storetest.WaitFor(t, "the other store to list X, Y and the new stream's subscription", func() bool {
		subs, err := other.Subscriptions(ctx)
		if err != nil {
			return false
		}
		var ids []string
		var stream bool
		for _, s := range subs {
			ids = append(ids, s.ID)
			var doc mercure.Subscription
			stream = stream || json.Unmarshal(s.JSON, &doc) == nil && doc.Match == topic
		}
		return stream && len(ids) == 3 && slices.Contains(ids, "X") && slices.Contains(ids, "Y")
	})
}

// TestSharedSubscriptionsRewrittenAfterFailover: a failover to a replica
// that had not received a store's last write of its subscriptions leaves
// its hash behind (a removed one still listed, an added one missing).
// The store finds its write count behind in the hash at its next write
// (the refresh, with no change) and rewrites it.
func TestSharedSubscriptionsRewrittenAfterFailover(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(redistest.Options(redistest.Addr(t)))
	t.Cleanup(func() { rdb.Close() })
	key := "stale-subs-" + uuidish(t)
	a := open(t, rdb, key, redisstore.WithSubscriptionTTL(600*time.Millisecond))
	b := open(t, rdb, key)
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := context.Background()
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("x", true), active("y", true)}); err != nil {
		t.Fatal(err)
	}
	names, err := rdb.SMembers(ctx, key+":hubs").Result()
	if err != nil || len(names) != 1 {
		t.Fatalf("stores sharing subscriptions: %q (%v), want A's", names, err)
	}
	hash := key + ":subs:" + names[0]
	replica, err := rdb.HGetAll(ctx, hash).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("x", false), active("z", true)}); err != nil {
		t.Fatal(err)
	}
	// The failover: the hash as the replica had it.
	pipe := rdb.TxPipeline()
	pipe.Del(ctx, hash)
	pipe.HSet(ctx, hash, replica)
	pipe.PExpire(ctx, hash, time.Minute)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, "B to list A's subscriptions as they are", func() bool {
		ids, err := storetest.SubscriptionIDs(ctx, b)
		return err == nil && slices.Equal(ids, []string{"y", "z"})
	})
}

func uuidish(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", "-") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}
