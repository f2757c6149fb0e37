// Command clusterload runs examples/standalone hubs (two, or -hubs N) on
// one store of its own, subscribers split between them and publishers on
// each, and does to them what a production cluster lives through
// (-events): it SIGSTOPs hub B for a while and continues it (hub-stop),
// then does to the store what its kind lives through (store):
//
//   - redis, postgres (an outage): one server, killed as a crash would
//     and restarted;
//   - nats: three nats-servers with JetStream, the stream kept by the
//     three (replicas=3 in the hubs' URL); the stream's leader is killed
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
// nats-embed runs no server: each hub embeds a NATS node (-nats-embed),
// and the nodes are the cluster (it needs -hubs 3). Its default events
// are hub-stop and hub-kill: the last hub killed (SIGKILL, its node with
// it), its subscribers moved to the other hubs (resuming with
// Last-Event-ID) and its publisher too, as a load balancer would send
// them; -hub-down later it is started again on its directory, and its
// publisher comes back to it. -events none runs the traffic alone, to
// measure the rate the hubs sustain.
//
// At the end it replays the store's history through a hub and checks
// every subscriber's events against it (see internal/seqcheck): nothing
// lost without a reported gap, nothing twice; it counts the updates
// acknowledged but missing from the history (lost) and those in it twice;
// it measures, for each event, how long publishing took to come back (to
// hub B, for its stop) and how many publishes were refused meanwhile,
// and the latency of the deliveries (from an update's first POST to a
// subscriber's read of it) of the updates sent in its window; and it
// checks hub B's peak RSS against its bound. It ends with one "result"
// line of key=value fields.
//
//	go run ./internal/cmd/clusterload -store redis
//	go run ./internal/cmd/clusterload -store postgres-standby -durable -subs 200 -rate 100
//	go run ./internal/cmd/clusterload -store redis-sentinel -lag 1s -subs 200 -rate 100
//	go run ./internal/cmd/clusterload -store nats-embed -hubs 3 -subs 200 -rate 100
//	go run ./internal/cmd/clusterload -store nats -hubs 3 -events none -warm 30s -rate 400
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
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	kind, standalone, natsServer                                                            string
	durable, keep                                                                           bool
	subs, rate, hubs                                                                        int
	events                                                                                  []string
	warm, pause, between, down, replicaDown, promoteAfter, primaryDown, after, lag, hubDown time.Duration
	maxQueued, slack                                                                        int64
	maxPending                                                                              int
}

// The events of -events.
const (
	eventHubStop = "hub-stop"
	eventStore   = "store"
	eventHubKill = "hub-kill"
)

// parseFlags parses the command line.
func parseFlags() config {
	var c config
	flag.StringVar(&c.kind, "store", kindRedis, "redis or postgres: a server of the run's own, killed and restarted; redis-sentinel, redis-cluster or postgres-standby: a primary and replicas, a replica killed and restarted, then the primary killed and a replica promoted; nats: three nats-servers, the stream's leader killed and restarted; nats-embed: no server, the hubs' embedded NATS nodes")
	flag.IntVar(&c.hubs, "hubs", 2, "hubs (A, B, C...): 3 or more for nats-embed")
	events := flag.String("events", "", "what the run does to the cluster, in order, -between apart: hub-stop (hub B SIGSTOPped for -pause), store (the store's kind's event), hub-kill (the last hub SIGKILLed, started again -hub-down later), or none (default hub-stop,store; for nats-embed hub-stop,hub-kill)")
	flag.DurationVar(&c.hubDown, "hub-down", 10*time.Second, "hub-kill: how long the killed hub stays down before it is started again (0: it stays down)")
	flag.StringVar(&c.natsServer, "nats-server", "", "nats: the nats-server program (default: MERCURE_TEST_NATS, else nats-server on PATH)")
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
	c.events = parseEvents(*events, c.kind)
	return c
}

// parseEvents returns the events of -events, by default those of kind.
func parseEvents(spec, kind string) []string {
	switch {
	case spec == "" && kind == kindNATSEmbed:
		return []string{eventHubStop, eventHubKill}
	case spec == "":
		return []string{eventHubStop, eventStore}
	case spec == "none":
		return nil
	}
	return strings.Split(spec, ",")
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
	case c.hubs < 2:
		return fmt.Errorf("-hubs %d: want 2 or more, a cluster", c.hubs)
	case c.kind == kindNATSEmbed && c.hubs < 3:
		return fmt.Errorf("-store %s needs -hubs 3 or more: a cluster of two nodes stops when either dies", c.kind)
	case c.hubDown < 0:
		return fmt.Errorf("-hub-down %v is negative", c.hubDown)
	}
	seen := map[string]bool{}
	for _, e := range c.events {
		switch {
		case e != eventHubStop && e != eventStore && e != eventHubKill:
			return fmt.Errorf("-events: %q: want %s, %s, %s, or none", e, eventHubStop, eventStore, eventHubKill)
		case seen[e]:
			return fmt.Errorf("-events: %s twice", e)
		case e == eventStore && c.kind == kindNATSEmbed:
			return fmt.Errorf("-events %s: the hubs' own NATS nodes are the store of %s: %s kills one with its hub", e, c.kind, eventHubKill)
		}
		seen[e] = true
	}
	if (c.durable || c.lag > 0) && !seen[eventStore] {
		return errors.New("-durable and -lag are about the store's failover: -events needs store")
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
	natsBin := ""
	if cfg.kind == kindNATS {
		natsBin = natsBinary(cfg.natsServer)
	}
	st := startStore(cfg.kind, dir, cfg.durable, natsBin)
	defer st.close()
	hubs := startHubs(standaloneBinary(cfg.standalone, dir), st, cfg)
	for _, h := range hubs {
		defer h.stop()
	}
	a := hubs[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lat := newLatencies(time.Now())
	followers := startFollowers(ctx, cfg.subs, hubs, lat)

	pctx, stopPublishing := context.WithCancel(ctx)
	var pubs sync.WaitGroup
	led := &ledger{}
	for i := range hubs {
		pubs.Go(func() { publishLoop(pctx, led, hubs, i, max(cfg.rate/len(hubs), 1)) })
	}
	started := time.Now()
	rss := &sampler{pid: hubs[1].cmd.Process.Pid}
	go rss.run(ctx)
	sched := &schedule{cfg: cfg, st: st, hubs: hubs, rss: rss}
	sched.run(started)
	elapsed := time.Since(started)
	stopPublishing()
	finish(&pubs, led, a, followers)
	cancel()
	rep := evaluate(cfg, led, sched, followers, storeOrder(a.base, end))
	rep.elapsed = elapsed
	rep.rssPeak = rss.peak.Load()
	rep.latency(lat, started.Add(elapsed))
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
	first := time.Now()
	waitAll("a hub to acknowledge the last update", 60*time.Second, func() bool { return led.publish(a, end, first) })
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

// startHubs starts the hubs (A, B, C...) on the store st: one after the
// other, or all at once when each embeds a NATS node, which waits for the
// others before its hub listens.
func startHubs(bin string, st *storeSet, cfg config) []*hub {
	args := []string{"-anonymous", "-insecure-publish", "-log-level", "error",
		"-max-queued-bytes", fmt.Sprint(cfg.maxQueued), "-max-pending-updates", fmt.Sprint(cfg.maxPending),
		"-max-connections", fmt.Sprint(cfg.subs + 100), "-history", "1000000"}
	hubs := make([]*hub, cfg.hubs)
	for i := range hubs {
		name := string(rune('A' + i))
		if st.hubArgs == nil {
			hubs[i] = startHub(bin, name, slices.Concat(args, []string{"-store", st.url}))
			continue
		}
		hubs[i] = newHub(bin, name, append(slices.Clone(args), st.hubArgs(i, cfg.hubs)...))
		hubs[i].start()
	}
	if st.hubArgs != nil {
		began := time.Now()
		for _, h := range hubs {
			h.waitListening()
		}
		log.Printf("%d hubs with embedded NATS nodes listening %.2fs after their start", len(hubs), time.Since(began).Seconds())
	}
	return hubs
}

// startFollowers starts n subscribers, split between the hubs, and waits
// until each has opened its stream.
func startFollowers(ctx context.Context, n int, hubs []*hub, lat *latencies) []*follower {
	var followers []*follower
	for i := range n {
		f := &follower{hubs: hubs, at: i % len(hubs), lat: lat}
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
	r := &report{kind: cfg.kind, durable: cfg.durable, lag: cfg.lag, subs: cfg.subs, rate: cfg.rate, hubs: cfg.hubs,
		events: cfg.events, stored: len(order), rssBase: sched.base, rssBound: sched.base + 2*cfg.maxQueued + cfg.slack}
	r.acked, r.refused = led.counts()
	for _, f := range followers {
		gaps = append(gaps, f.gaps()...)
		r.ends += int(f.ends.Load())
		r.moved += int(f.moved.Load())
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
