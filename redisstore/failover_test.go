package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/redisstore"
	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

// history records what a store's feed passes to a listener, rewinds and
// gaps included, in order.
type history struct {
	mu  sync.Mutex
	got []string
}

func listenAll(t *testing.T, s store.Store) *history {
	h := &history{}
	add := func(v string) { h.mu.Lock(); h.got = append(h.got, v); h.mu.Unlock() }
	t.Cleanup(s.Listen(store.Listener{
		Event:   func(e *store.Event) { add(e.ID) },
		Gap:     func() { add("gap") },
		Rewound: func(head uint64, id string) { add(fmt.Sprintf("rewound:%d:%s", head, id)) },
	}))
	return h
}

func (h *history) entries() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// waitFor waits until the listener got want last.
func (h *history) waitFor(t *testing.T, want string) []string {
	t.Helper()
	var got []string
	if !storetest.Within(storetest.Deadline, func() bool {
		got = h.entries()
		return len(got) > 0 && got[len(got)-1] == want
	}) {
		t.Fatalf("the feed passed %q, want %q last", got, want)
	}
	return got
}

// A server restarted without its data rewinds the history: the feed
// tells its listeners before the first event of the new one, and the
// store's latest id follows.
func TestFeedRewindsWhenTheServerLosesItsData(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, false)
	s := open(t, srv.Client(), "rewind")
	t.Cleanup(func() { s.Close() })
	h := listenAll(t, s)
	b := storetest.NewEvent("b")
	storetest.MustAppend(t, s, storetest.NewEvent("a"))
	storetest.MustAppend(t, s, b)
	h.waitFor(t, "b")
	srv.Restart()
	storetest.MustAppend(t, s, storetest.NewEvent("c"))
	got := h.waitFor(t, "c")
	if want := []string{"a", "b", "rewound:0:earliest", "c"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the feed passed %q, want %q", got, want)
	}
	if id := s.LatestID(); id != "c" {
		t.Fatalf("LatestID %q, want c", id)
	}
	// b vanished, and its publisher sends it again: a client that got b
	// and resumes with it must not resume after b's retry, which would
	// skip c. b is an unknown cursor: the backlog holds every event.
	retry := *b
	retry.Seq = 0
	storetest.MustAppend(t, s, &retry)
	backlog, err := s.Replay(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if backlog.Cursor != store.Earliest {
		t.Fatalf("a replay from b, which vanished, starts at %q, want %q", backlog.Cursor, store.Earliest)
	}
}

// A history rewound with nothing for the feed to notice (no error, no
// number seen before: a new primary whose clock is behind adds entries
// before the last one the feed read) is found by the check the feed runs
// every second, and the listeners are told.
func TestFeedFindsASilentRewind(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(redistest.Options(redistest.Addr(t)))
	t.Cleanup(func() { rdb.Close() })
	key := fmt.Sprintf("silent-rewind-%d", time.Now().UnixNano())
	s := open(t, rdb, key)
	t.Cleanup(func() { s.Close() })
	h := listenAll(t, s)
	a, b := storetest.NewEvent("a"), storetest.NewEvent("b")
	storetest.MustAppend(t, s, a)
	// b in a later millisecond than a, so that an id fits between them.
	storetest.Within(storetest.Deadline, func() bool { return uint64(time.Now().UnixMilli()) > a.Seq>>20+1 })
	storetest.MustAppend(t, s, b)
	h.waitFor(t, "b")
	// What the new primary holds: a, without b, then an entry of its own
	// numbered as b was, at an id between a's and b's.
	ctx := context.Background()
	bID := streamID(b.Seq)
	entries, err := rdb.XRange(ctx, key, bID, bID).Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("b's entry: %v %v", entries, err)
	}
	values := entries[0].Values
	values["i"] = "new"
	values["e"] = strings.Replace(values["e"].(string), `"i":"b"`, `"i":"new"`, 1)
	between := fmt.Sprintf("%d-%d", a.Seq>>20+1, 0)
	if !(a.Seq < (a.Seq>>20+1)<<20 && (a.Seq>>20+1)<<20 < b.Seq) {
		t.Fatalf("no id between a (%s) and b (%s)", streamID(a.Seq), bID)
	}
	first, err := rdb.XRange(ctx, key, "-", "+").Result()
	if err != nil || len(first) != 2 {
		t.Fatalf("the stream holds %v (%v), want a and b", first, err)
	}
	pipe := rdb.TxPipeline()
	pipe.Del(ctx, key) // a stream remembers the ids it gave: rebuilt, as a replica has it
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: first[0].ID, Values: first[0].Values})
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: between, Values: values})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	seq := (a.Seq>>20 + 1) << 20
	h.waitFor(t, fmt.Sprintf("rewound:%d:new", seq))
	storetest.MustAppend(t, s, storetest.NewEvent("c"))
	got := h.waitFor(t, "c")
	if want := []string{"a", "b", fmt.Sprintf("rewound:%d:new", seq), "c"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the feed passed %q, want %q", got, want)
	}
}

func streamID(seq uint64) string { return fmt.Sprintf("%d-%d", seq>>20, seq&(1<<20-1)) }

// With WithReplicas, an append is acknowledged once the replicas have
// it; while one cannot (it is stopped), the append fails with
// ErrNotReplicated, the update is recorded all the same, and the
// publisher's retry, once the replica is back, is recorded once.
func TestAppendWaitsForReplicas(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t, false)
	replica := redistest.Start(t, false)
	ctx := context.Background()
	rc := replica.Client()
	host, port, _ := strings.Cut(primary.Addr, ":")
	if err := rc.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	s := open(t, primary.Client(), "replicated", redisstore.WithReplicas(1), redisstore.WithTimeout(2*time.Second))
	t.Cleanup(func() { s.Close() })
	storetest.MustAppend(t, s, storetest.NewEvent("a")) // retried until the replica is in sync
	if n, err := rc.XLen(ctx, "replicated").Result(); err != nil || n != 1 {
		t.Fatalf("the replica holds %d entries (%v) once the append is acknowledged, want 1", n, err)
	}
	replica.Pause()
	b := storetest.NewEvent("b")
	// On a loaded machine a call may outlast its timeout too: only
	// ErrNotReplicated, or an acknowledgement, answers the question.
	var err error
	storetest.Within(storetest.Deadline, func() bool {
		err = s.Append(ctx, b)
		return err == nil || errors.Is(err, redisstore.ErrNotReplicated)
	})
	if !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("Append with the replica stopped: %v, want ErrNotReplicated", err)
	}
	replica.Resume()
	retry := *b
	retry.Seq = 0
	storetest.MustAppend(t, s, &retry)
	if ids := replayIDs(t, s); strings.Join(ids, " ") != "a b" {
		t.Fatalf("history %q, want a b: the retry recorded once", ids)
	}
}

func replayIDs(t *testing.T, s store.Store) []string {
	t.Helper()
	b, err := s.Replay(context.Background(), store.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for e, err := range b.Events {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

// A cluster client works only with a stream key that keeps every key of
// the store in one slot, and reading the primary.
func TestClusterClientNeedsAHashTag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key  string
		opts redis.ClusterOptions
		ok   bool
	}{
		{"mercure", redis.ClusterOptions{}, false},
		{"{}mercure", redis.ClusterOptions{}, false},
		{"mercure{", redis.ClusterOptions{}, false},
		{"{mercure}", redis.ClusterOptions{ReadOnly: true}, false},
		{"{mercure}", redis.ClusterOptions{RouteByLatency: true}, false},
		{"app:{mercure}", redis.ClusterOptions{}, true},
	} {
		c.opts.Addrs = []string{"127.0.0.1:1"}
		c.opts.DialTimeout = 50 * time.Millisecond
		client := redis.NewClusterClient(&c.opts)
		s, err := redisstore.New(client, c.key, redisstore.WithTimeout(100*time.Millisecond))
		client.Close()
		if s != nil {
			s.Close()
		}
		if refused := errors.Is(err, mercure.ErrInvalidOption); refused == c.ok {
			t.Errorf("New with key %q and %+v: %v", c.key, c.opts, err)
		}
	}
}

// failoverTimeout bounds each call of the failover suite's stores: a
// store waiting for a replica that lags (WithReplicas) fails its
// appends within three quarters of it, and the publisher sends them
// again.
const failoverTimeout = 2 * time.Second

// TestFailoverSentinel runs storetest.RunFailover behind Sentinel.
// Without WithReplicas, the only replica lags when the primary dies:
// the updates it lacked are lost, and every stream that got one is told.
// With WithReplicas(1), both replicas lag: nothing is acknowledged until
// one of them has taken over (and the other follows it), and nothing
// acknowledged is lost.
func TestFailoverSentinel(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "Async", true: "WithReplicas"}[durable], func(t *testing.T) {
			t.Parallel()
			replicas := map[bool]int{false: 1, true: 2}[durable]
			s := redistest.StartSentinel(t, replicas)
			opts := []redisstore.Option{redisstore.WithTimeout(failoverTimeout)}
			if durable {
				opts = append(opts, redisstore.WithReplicas(1))
			}
			// Lag stalls the replicas one after the other: the last one
			// may have acknowledged what the others lack. Sentinel
			// promotes the replica furthest ahead by the offsets it last
			// heard, which a stalled replica stops reporting: the last
			// one is preferred, as Sentinel would pick it.
			rs := s.Replicas()
			s.Prefer(rs[len(rs)-1])
			var release []func()
			storetest.RunFailover(t, &storetest.Failover{
				Open: func(t *testing.T) store.Store {
					return open(t, s.Client(), "{failover}", opts...)
				},
				Lag: func(t *testing.T) {
					for _, r := range rs {
						release = append(release, r.Stall())
					}
				},
				KillPrimary: func(t *testing.T) {
					s.KillPrimary()
					for _, f := range release {
						f()
					}
				},
				Durable: durable,
			})
		})
	}
}

// TestFailoverCluster runs storetest.RunFailover on a Redis Cluster,
// with go-redis's default ClusterStateReloadInterval (a minute): the
// store has the client read the cluster's layout again when a call
// fails. With WithReplicas(1), the promoted replica has none of its own
// until the old primary comes back as one, as an operator restarts it.
func TestFailoverCluster(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "Async", true: "WithReplicas"}[durable], func(t *testing.T) {
			t.Parallel()
			c := redistest.StartCluster(t)
			const key = "{failover}"
			opts := []redisstore.Option{redisstore.WithTimeout(failoverTimeout)}
			if durable {
				opts = append(opts, redisstore.WithReplicas(1))
			}
			var release func()
			storetest.RunFailover(t, &storetest.Failover{
				Open: func(t *testing.T) store.Store {
					o := c.Options()
					o.ClusterStateReloadInterval = 0 // go-redis's default
					rdb := redis.NewClusterClient(o)
					t.Cleanup(func() { rdb.Close() })
					return open(t, rdb, key, opts...)
				},
				Lag: func(t *testing.T) { release = c.ReplicasFor(key)[0].Stall() },
				KillPrimary: func(t *testing.T) {
					old := c.KillPrimaryFor(key)
					release()
					if durable {
						c.WaitFailover(key, old)
						old.Start()
					}
				},
				Durable: durable,
			})
		})
	}
}
