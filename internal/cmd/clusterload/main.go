// Command clusterload runs two examples/standalone hubs on one store of
// its own, subscribers split between them and publishers on both, and
// does to them what a production cluster lives through: it SIGSTOPs hub
// B for a while and continues it, then, by the store's kind:
//
//   - redis, postgres (an outage): one server, killed as a crash would
//     and restarted;
//   - redis-sentinel (a primary, two replicas, three sentinels),
//     redis-cluster (three primaries with a replica each) and
//     postgres-standby (a primary and a streaming standby) (a failover):
//     a replica is killed and restarted, then the primary is killed and
//     a replica takes over, promoted by the sentinels, the cluster, or
//     (PostgreSQL) by the run a second later, as failover tooling would;
//     a Redis primary is started again a few seconds later, as a replica
//     of the new one, a PostgreSQL one stays down. -durable makes the
//     hubs' appends wait for a replica (Redis: replicas=1 in the store's
//     URL) or the primary's commits for the standby (PostgreSQL's
//     synchronous replication). -lag makes the replica that takes over
//     stop receiving the primary's writes for a while before the
//     primary's kill, so that the failover loses what the primary
//     acknowledged meanwhile (with -durable, publishing is refused
//     meanwhile): on loopback, replicas keep up, and a failover loses
//     nothing otherwise.
//
// At the end it replays the store's history through a hub and checks
// every subscriber's events against it (see internal/seqcheck): nothing
// lost without a reported gap, nothing twice; it counts the updates
// acknowledged but missing from the history (lost) and those in it twice;
// it measures, for each event, how long publishing took to come back (to
// hub B, for its stop) and how many publishes were refused meanwhile;
// and it checks hub B's peak RSS against its bound. It ends with one
// "result" line of key=value fields.
//
//	go run ./internal/cmd/clusterload -store redis
//	go run ./internal/cmd/clusterload -store postgres-standby -durable -subs 200 -rate 100
//	go run ./internal/cmd/clusterload -store redis-sentinel -lag 1s -subs 200 -rate 100
//
// It exits 1 if an update was lost silently or received twice, if the
// store holds one twice, if it lost an acknowledged update where it must
// not (the outage kinds, and -durable), if a lag did not lose what the
// primary acknowledged meanwhile (or, with -durable, if one was
// acknowledged meanwhile), if publishing did not come back after an
// event, or if hub B's RSS went past its bound. It is a
// command, not a test: a run takes about a minute and two processor
// cores.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/mercurekit/mercure/internal/loopback"
	"github.com/mercurekit/mercure/internal/seqcheck"
)

const topic = "https://example.com/load"

// end is the id of the last update, published once the traffic ended:
// every subscriber must reach it.
const end = "end"

// config is the run's flags.
type config struct {
	kind, standalone                                                               string
	durable, keep                                                                  bool
	subs, rate                                                                     int
	warm, pause, between, down, replicaDown, promoteAfter, primaryDown, after, lag time.Duration
	maxQueued, slack                                                               int64
	maxPending                                                                     int
}

// parseFlags parses the command line.
func parseFlags() config {
	var c config
	flag.StringVar(&c.kind, "store", kindRedis, "redis or postgres: a server of the run's own, killed and restarted; redis-sentinel, redis-cluster or postgres-standby: a primary and replicas, a replica killed and restarted, then the primary killed and a replica promoted")
	flag.BoolVar(&c.durable, "durable", false, "failover kinds: acknowledge an update once a replica has it (Redis: replicas=1 in the hubs' store URL; PostgreSQL: synchronous replication to the standby)")
	flag.BoolVar(&c.keep, "keep", false, "keep the run's directory, with the store's data and its servers' logs (a sentinel's says which replica it promoted, and why), rather than remove it")
	flag.StringVar(&c.standalone, "standalone", "", "examples/standalone binary (default: built from ./examples/standalone)")
	flag.IntVar(&c.subs, "subs", 1000, "subscribers, split between the hubs")
	flag.IntVar(&c.rate, "rate", 200, "updates per second, split between the hubs")
	flag.DurationVar(&c.warm, "warm", 10*time.Second, "traffic before hub B is stopped")
	flag.DurationVar(&c.pause, "pause", 10*time.Second, "how long hub B stays SIGSTOPped")
	flag.DurationVar(&c.between, "between", 10*time.Second, "traffic between SIGCONT and the store's (or the replica's) kill, and between the replica's restart and the primary's kill")
	flag.DurationVar(&c.down, "down", 3*time.Second, "outage kinds: how long the store stays down")
	flag.DurationVar(&c.replicaDown, "replica-down", 5*time.Second, "failover kinds: how long the killed replica stays down")
	flag.DurationVar(&c.promoteAfter, "promote-after", time.Second, "postgres-standby: time from the primary's kill to the standby's promotion")
	flag.DurationVar(&c.primaryDown, "primary-down", 5*time.Second, "redis-sentinel, redis-cluster: time from the primary's kill to its restart as a replica of the one that took over (0: it stays down); PostgreSQL's stays down")
	flag.DurationVar(&c.lag, "lag", 0, "failover kinds: for this long before the primary's kill, the replica that takes over receives none of its writes (Redis: CLIENT PAUSE WRITE on the replicas; PostgreSQL: the primary's walsender stopped), so that the failover loses what the primary acknowledged meanwhile; with -durable, publishing is refused meanwhile. Behind Sentinel keep it under 2s: a sentinel takes a replica paused that long for down")
	flag.DurationVar(&c.after, "after", 15*time.Second, "traffic after the store's restart, or the primary's kill")
	flag.Int64Var(&c.maxQueued, "max-queued-bytes", 16<<20, "the hubs' -max-queued-bytes")
	flag.IntVar(&c.maxPending, "max-pending-updates", 256, "the hubs' -max-pending-updates")
	flag.Int64Var(&c.slack, "rss-slack", 48<<20, "RSS hub B may take above its RSS before the pause and twice -max-queued-bytes (the streams' queues and the feed's backlog): the runtime's own")
	flag.Parse()
	return c
}

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	os.Exit(run(parseFlags()))
}

// validate returns why the flags make no run, nil if they make one.
func (c config) validate() error {
	replicated := fmt.Sprintf("a store with replicas: %s, %s or %s", kindRedisSentinel, kindRedisCluster, kindPostgresStandby)
	switch {
	case c.durable && !failoverKind(c.kind):
		return fmt.Errorf("-durable needs %s", replicated)
	case c.lag < 0:
		return fmt.Errorf("-lag %v is negative", c.lag)
	case c.lag > 0 && !failoverKind(c.kind):
		return fmt.Errorf("-lag needs %s", replicated)
	}
	return nil
}

// run does the run, and returns the exit status: 1 if it failed.
func run(cfg config) int {
	if errNoPause != nil {
		log.Fatal(errNoPause)
	}
	if err := cfg.validate(); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "clusterload-")
	check(err)
	if cfg.keep {
		log.Printf("the store's data and its servers' logs are in %s, kept after the run", dir)
	} else {
		defer os.RemoveAll(dir)
		atExit(func() { os.RemoveAll(dir) })
	}
	st := startStore(cfg.kind, dir, cfg.durable)
	defer st.close()
	a, b := startHubs(standaloneBinary(cfg.standalone, dir), st.url, cfg)
	defer a.stop()
	defer b.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followers := startFollowers(ctx, cfg.subs, a, b)

	pctx, stopPublishing := context.WithCancel(ctx)
	var pubs sync.WaitGroup
	led := &ledger{}
	for _, h := range []*hub{a, b} {
		pubs.Go(func() { publishLoop(pctx, led, h, cfg.rate/2) })
	}
	started := time.Now()
	rss := &sampler{pid: b.cmd.Process.Pid}
	go rss.run(ctx)
	sched := &schedule{cfg: cfg, st: st, b: b, rss: rss}
	sched.run(started)
	elapsed := time.Since(started)
	stopPublishing()
	finish(&pubs, led, a, followers)
	cancel()
	rep := evaluate(cfg, led, sched, followers, storeOrder(a.base, end))
	rep.elapsed = elapsed
	rep.rssPeak = rss.peak.Load()
	rep.print(os.Stdout)
	if len(rep.failures()) > 0 {
		return 1
	}
	return 0
}

// finish ends the traffic: it waits until the publishers' last updates
// are acknowledged, then publishes the last one, end, to a, and waits
// until every subscriber got it.
func finish(pubs *sync.WaitGroup, led *ledger, a *hub, followers []*follower) {
	waitGroup("the publishers' last updates to be acknowledged", 60*time.Second, pubs)
	waitAll("a hub to acknowledge the last update", 60*time.Second, func() bool { return led.publish(a, end) })
	waitAll("every subscriber to get the last update", 60*time.Second, func() bool {
		for _, f := range followers {
			if f.lastID() != end {
				return false
			}
		}
		return true
	})
}

// standaloneBinary returns bin, or, if empty, a standalone built in dir.
func standaloneBinary(bin, dir string) string {
	if bin != "" {
		return bin
	}
	bin = filepath.Join(dir, "standalone")
	out, err := exec.Command("go", "build", "-o", bin, "./examples/standalone").CombinedOutput()
	if err != nil {
		fatalf("building examples/standalone (run from the repository's root): %v\n%s", err, out)
	}
	return bin
}

// startHubs starts hubs A and B on the store at storeURL.
func startHubs(bin, storeURL string, cfg config) (a, b *hub) {
	args := []string{"-anonymous", "-insecure-publish", "-store", storeURL, "-log-level", "error",
		"-max-queued-bytes", fmt.Sprint(cfg.maxQueued), "-max-pending-updates", fmt.Sprint(cfg.maxPending),
		"-max-connections", fmt.Sprint(cfg.subs + 100), "-history", "1000000"}
	return startHub(bin, "A", args), startHub(bin, "B", args)
}

// startFollowers starts n subscribers, split between a and b, and waits
// until each has opened its stream.
func startFollowers(ctx context.Context, n int, a, b *hub) []*follower {
	var followers []*follower
	for i := range n {
		h := a
		if i%2 == 1 {
			h = b
		}
		f := &follower{base: h.base}
		followers = append(followers, f)
		go f.run(ctx)
	}
	waitAll("every subscriber's stream to open", 60*time.Second, func() bool {
		for _, f := range followers {
			if f.opened.Load() == 0 {
				return false
			}
		}
		return true
	})
	log.Printf("%d subscribers open", n)
	return followers
}

// evaluate checks the run's records against the store's history, order.
func evaluate(cfg config, led *ledger, sched *schedule, followers []*follower, order []string) *report {
	attempts, acked := led.snapshot()
	var gaps []time.Time
	r := &report{kind: cfg.kind, durable: cfg.durable, lag: cfg.lag, subs: cfg.subs, rate: cfg.rate, stored: len(order),
		rssBase: sched.base, rssBound: sched.base + 2*cfg.maxQueued + cfg.slack}
	r.acked, r.refused = led.counts()
	for _, f := range followers {
		gaps = append(gaps, f.gaps()...)
		r.ends += int(f.ends.Load())
	}
	r.stats, r.lost, r.duplicated = analyze(sched.events, attempts, acked, order, gaps)
	seen := map[string]bool{}
	var unique []string
	for _, id := range order {
		if _, ok := acked[id]; !ok {
			r.extra++
		}
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	o := seqcheck.NewOrder(unique, nil)
	for _, f := range followers {
		r.sum.Add(f.check(o, end))
	}
	return r
}

func check(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

var exits []func()

// atExit runs f when the run fails: no server outlives it.
func atExit(f func()) { exits = append(exits, f) }

// fatalf kills every process the run started, removes its directory, and
// exits 1 with the message.
func fatalf(format string, args ...any) {
	for _, f := range exits {
		f()
	}
	log.Fatalf(format, args...)
}

// waitAll waits until cond holds, checking every 50 ms, and fails the
// run after limit.
func waitAll(what string, limit time.Duration, cond func() bool) {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitGroup waits for wg, and fails the run after limit: publishers
// retry until acknowledged, which never happens if the store does not
// come back.
func waitGroup(what string, limit time.Duration, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		fatalf("timed out waiting for %s", what)
	}
}

// freePort returns a loopback port that no outgoing connection can take
// while the store is down (see package loopback).
func freePort() int {
	p, err := loopback.Free()
	check(err)
	return p
}
