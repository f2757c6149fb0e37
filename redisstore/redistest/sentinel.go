package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure/storetest"
)

// SentinelMaster is the name that the sentinels of [StartSentinel] know
// their primary by.
const SentinelMaster = "mercure"

// Sentinel is a primary, its replicas and three sentinels that watch
// them, each a redis-server process of a test's own, as [StartSentinel]
// starts them. The sentinels take the primary for down once it has not
// answered for a second, and two of them must agree before one promotes
// a replica.
type Sentinel struct {
	// MasterName is the name the sentinels know the primary by
	// ([SentinelMaster]), for a client's MasterName.
	MasterName string
	// Addrs are the sentinels' addresses, HOST:PORT on loopback, for a
	// client's SentinelAddrs.
	Addrs []string

	t        *testing.T
	nodes    []*Server // the data servers: the primary at the start first
	watchers []*Server // the sentinels
	// first is the primary at the start, until the sentinels run to
	// say which it is.
	first string
}

// StartSentinel starts a primary, replicas replicas of it, and three
// sentinels watching them (quorum 2, down-after-milliseconds 1000,
// failover-timeout 3000), all on free loopback ports, each in a
// directory of its own (a sentinel rewrites its configuration file; a
// data server persists nothing, so that a restarted one comes back empty
// and syncs from the primary of the day). It returns once every sentinel
// reports the primary, sees each replica in sync and knows the other
// sentinels: a failover can then happen. Everything is killed when the
// test ends. It skips as [Start] does.
//
// Replication is asynchronous, as in production: the primary
// acknowledges a write before its replicas have it, and a failover loses
// the writes that the promoted replica lacked. [Server.Stall] makes a
// replica lack some; [Sentinel.Prefer] makes it the one promoted.
func StartSentinel(t *testing.T, replicas int) *Sentinel {
	t.Helper()
	needServer(t)
	if replicas < 0 {
		t.Fatalf("StartSentinel: %d replicas", replicas)
	}
	s := &Sentinel{MasterName: SentinelMaster, t: t}
	for range replicas + 1 {
		n := &Server{t: t, Addr: storetest.Addr(t), dir: storetest.TempDir(t)}
		n.args = func() []string { return s.replicaOf(n) }
		t.Cleanup(n.Kill)
		s.nodes = append(s.nodes, n)
	}
	s.first = s.nodes[0].Addr
	for _, n := range s.nodes {
		n.Start()
	}
	// In sync before the sentinels start: a sentinel learns of the
	// replicas from the primary's INFO, which it asks at once, then
	// every 10 s (Redis 6; every second below).
	storetest.WaitFor(t, "the replicas to sync", func() bool { return s.nodes[0].online() == replicas })

	host, port, _ := net.SplitHostPort(s.first)
	conf := fmt.Sprintf(`sentinel monitor %[1]s %[2]s %[3]s 2
sentinel down-after-milliseconds %[1]s 1000
sentinel failover-timeout %[1]s 3000
`, s.MasterName, host, port)
	for range 3 {
		dir := storetest.TempDir(t)
		w := &Server{t: t, Addr: storetest.Addr(t), dir: dir, conf: filepath.Join(dir, "sentinel.conf")}
		if err := os.WriteFile(w.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Kill)
		w.Start()
		// Redis 7 lets a sentinel ask its servers' INFO every second
		// rather than every 10, and say hello to the other sentinels
		// every half second rather than 2: they learn sooner of the
		// replicas, of a priority (see Prefer) and of each other. And a
		// sentinel that finds its clock jumped (its timer held for 2 s
		// on a loaded machine) acts again after 5 s rather than 30 (TILT
		// mode), within a test's deadline. It pings every half second
		// rather than every second: a sentinel that connects to a new
		// primary only at its next ping may otherwise take it for down a
		// second after the switch, and fail over again (seen by
		// clusterload). An older sentinel refuses; it is only slower.
		rdb, ctx, cancel := w.poll()
		rdb.Do(ctx, "SENTINEL", "DEBUG", "info-period", "1000", "publish-period", "500", "ping-period", "500", "tilt-period", "5000")
		cancel()
		s.watchers = append(s.watchers, w)
		s.Addrs = append(s.Addrs, w.Addr)
	}
	storetest.WaitFor(t, "the sentinels to agree on the primary and to see its replicas and each other", func() bool {
		return s.settled(replicas)
	})
	return s
}

// replicaOf returns the arguments that start data server n: as a replica
// of the primary that the sentinels report (the first while they do not
// run), unless that is n itself.
func (s *Sentinel) replicaOf(n *Server) []string {
	// A primary that streams its snapshot to new replicas waits 5 s by
	// default for more to come and share it.
	args := []string{"--repl-diskless-sync-delay", "0"}
	primary := s.first
	for _, w := range s.watchers {
		if addr, err := s.ask(w); err == nil {
			primary = addr
			break
		}
	}
	if primary == n.Addr {
		return args
	}
	host, port, _ := net.SplitHostPort(primary)
	return append(args, "--replicaof", host, port)
}

// ask returns the address of the primary that sentinel w reports.
func (s *Sentinel) ask(w *Server) (string, error) {
	rdb, ctx, cancel := w.poll()
	defer cancel()
	hp, err := rdb.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName).StringSlice()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: primary %q", w.Addr, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// agreed returns the data server that every sentinel reports as the
// primary, if they agree.
func (s *Sentinel) agreed() (*Server, bool) {
	var primary string
	for _, w := range s.watchers {
		addr, err := s.ask(w)
		if err != nil || (primary != "" && addr != primary) {
			return nil, false
		}
		primary = addr
	}
	for _, n := range s.nodes {
		if n.Addr == primary {
			return n, true
		}
	}
	s.t.Fatalf("the sentinels report a primary %s that is none of the test's servers", primary)
	return nil, false
}

// settled reports whether every sentinel reports the first primary, sees
// replicas replicas in sync with it and knows the other sentinels.
func (s *Sentinel) settled(replicas int) bool {
	if p, ok := s.agreed(); !ok || p.Addr != s.first {
		return false
	}
	for _, w := range s.watchers {
		rdb, ctx, cancel := w.poll()
		rs, err := rdb.Do(ctx, "SENTINEL", "REPLICAS", s.MasterName).Slice()
		ws, err2 := rdb.Do(ctx, "SENTINEL", "SENTINELS", s.MasterName).Slice()
		cancel()
		if err != nil || err2 != nil {
			return false
		}
		healthy := func(list []any, flags string) int {
			n := 0
			for _, e := range list {
				if f := fields(e); f["flags"] == flags && (flags != "slave" || f["master-link-status"] == "ok") {
					n++
				}
			}
			return n
		}
		if healthy(rs, "slave") != replicas || healthy(ws, "sentinel") != len(s.watchers)-1 {
			return false
		}
	}
	return true
}

// fields returns the fields of one instance in the reply of SENTINEL
// REPLICAS or SENTINELS: a flat list of names and values (RESP2), or a
// map (RESP3).
func fields(e any) map[string]string {
	f := map[string]string{}
	switch e := e.(type) {
	case []any:
		for i := 0; i+1 < len(e); i += 2 {
			f[fmt.Sprint(e[i])] = fmt.Sprint(e[i+1])
		}
	case map[any]any:
		for k, v := range e {
			f[fmt.Sprint(k)] = fmt.Sprint(v)
		}
	}
	return f
}

// Options returns the options of a client of the primary through the
// sentinels, as [Options] does for one server: a call is bounded by its
// context (ContextTimeoutEnabled) and each dial, read and write by
// [Patient].
func (s *Sentinel) Options() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: slices.Clone(s.Addrs),
		ContextTimeoutEnabled: true, DialTimeout: Patient, ReadTimeout: Patient, WriteTimeout: Patient}
}

// Client returns a client of the primary through the sentinels, with
// [Sentinel.Options], closed when the test ends. After a failover it
// finds the new primary by itself: the sentinels tell it of the switch,
// and it asks them again when it cannot reach the old one.
func (s *Sentinel) Client() *redis.Client {
	rdb := redis.NewFailoverClient(s.Options())
	s.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Nodes returns the data servers, the primary at the start first, to
// kill, restart or pause. A restarted one comes back empty, as a replica
// of the primary that the sentinels report then; the sentinels turn a
// restarted former primary into a replica too, but it comes back as the
// primary (and empties its replicas) if they still report it.
func (s *Sentinel) Nodes() []*Server { return slices.Clone(s.nodes) }

// Primary returns the data server that the sentinels report as the
// primary, once they all agree.
func (s *Sentinel) Primary() *Server {
	s.t.Helper()
	var p *Server
	storetest.WaitFor(s.t, "the sentinels to agree on the primary", func() bool {
		var ok bool
		p, ok = s.agreed()
		return ok
	})
	return p
}

// Replicas returns the data servers other than the [Sentinel.Primary],
// killed ones included.
func (s *Sentinel) Replicas() []*Server {
	s.t.Helper()
	p := s.Primary()
	return slices.DeleteFunc(s.Nodes(), func(n *Server) bool { return n == p })
}

// KillPrimary kills the primary (SIGKILL) and returns it; nothing
// restarts it. It returns once every running replica has seen its link
// to it go down, so that a replica held by [Server.Stall] has lost what
// it held.
func (s *Sentinel) KillPrimary() *Server {
	s.t.Helper()
	p := s.Primary()
	p.Kill()
	waitLinksDown(s.t, slices.DeleteFunc(s.Nodes(), func(n *Server) bool { return n == p }))
	return p
}

// WaitFailover waits until the sentinels have replaced old, the primary
// that [Sentinel.KillPrimary] killed: every sentinel reports the same new
// primary, which says it is one and takes a write (of the key
// "redistest:probe"). It returns the new primary.
func (s *Sentinel) WaitFailover(old *Server) *Server {
	s.t.Helper()
	var p *Server
	storetest.WaitFor(s.t, "the sentinels to promote a replica in place of "+old.Addr, func() bool {
		var ok bool
		if p, ok = s.agreed(); !ok || p == old || !p.running() {
			return false
		}
		return p.writable()
	})
	return p
}

// writable reports whether the server is a primary that takes a write.
func (s *Server) writable() bool {
	if f, err := s.info("replication"); err != nil || f["role"] != "master" {
		return false
	}
	rdb, ctx, cancel := s.poll()
	defer cancel()
	return rdb.Set(ctx, "redistest:probe", s.Addr, 0).Err() == nil
}

// WaitReplicas waits until the primary that the sentinels report lists
// at least n replicas online (in sync, receiving its writes): after a
// failover, say, once the sentinels have pointed the other replicas at
// the new primary, or after a replica's restart.
func (s *Sentinel) WaitReplicas(n int) {
	s.t.Helper()
	storetest.WaitFor(s.t, fmt.Sprintf("%d replicas online", n), func() bool {
		p, ok := s.agreed()
		return ok && p.online() >= n
	})
}

// Prefer makes the sentinels promote replica r rather than another one
// at the next failover, however far behind it is: it gives r the
// replica-priority 1 (lower is preferred; the others keep the default
// 100, and 0 would bar r), and returns once every sentinel has seen it.
// A sentinel picks among the replicas that answer it, whose link to the
// primary went down at most about ten times down-after-milliseconds
// before the primary's, by priority, then by replication offset (the
// furthest ahead), then by run id. Call it before stalling r
// ([Server.Stall]): a stalled replica answers no sentinel's INFO. A
// restart of r forgets the priority.
func (s *Sentinel) Prefer(r *Server) {
	s.t.Helper()
	rdb, ctx, cancel := r.poll()
	err := rdb.ConfigSet(ctx, "replica-priority", "1").Err()
	cancel()
	if err != nil {
		s.t.Fatalf("replica-priority on %s: %v", r.Addr, err)
	}
	storetest.WaitFor(s.t, "the sentinels to see the priority of "+r.Addr, func() bool {
		for _, w := range s.watchers {
			rdb, ctx, cancel := w.poll()
			rs, err := rdb.Do(ctx, "SENTINEL", "REPLICAS", s.MasterName).Slice()
			cancel()
			if err != nil || !slices.ContainsFunc(rs, func(e any) bool {
				f := fields(e)
				return f["name"] == r.Addr && f["slave-priority"] == "1"
			}) {
				return false
			}
		}
		return true
	})
}
