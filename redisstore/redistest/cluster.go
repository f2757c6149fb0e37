package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure/storetest"
)

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// Cluster is a Redis Cluster of six nodes, three primaries with a
// replica each, every one a redis-server process of a test's own, as
// [StartCluster] starts them. A node takes another for failing once it
// has not answered for a second (cluster-node-timeout 1000); once most
// primaries agree, a replica of a failed primary takes its place.
type Cluster struct {
	// Addrs are the nodes' addresses, HOST:PORT on loopback, for a
	// client's Addrs.
	Addrs []string

	t     *testing.T
	nodes []*Server
}

// StartCluster starts a Redis Cluster of six nodes on free loopback
// ports, each in a directory of its own (where it keeps its view of the
// cluster, nodes.conf; it persists no data, so that a restarted node
// comes back empty and syncs from its primary), and joins them with
// redis-cli --cluster create, three primaries and a replica of each. It
// returns once every node reports cluster_state:ok, they agree on who
// serves each slot, and every replica is in sync. Everything is killed
// when the test ends. It skips as [Start] does, and when redis-cli is
// missing.
//
// Give the keys that one call touches a common hash tag, such as
// "{mercure}": a cluster refuses a command or script whose keys lie in
// different slots. Replication is asynchronous, as with [StartSentinel]:
// a failover loses the writes that the promoted replica lacked
// ([Server.Stall] makes it lack some).
func StartCluster(t *testing.T) *Cluster {
	t.Helper()
	needServer(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		storetest.Skip(t, storetest.Want{What: "redis-cli", How: "install it (Debian package redis-tools)"})
	}
	c := &Cluster{t: t}
	for range 6 {
		n := &Server{t: t, Addr: storetest.Addr(t), dir: storetest.TempDir(t)}
		args := []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(n.dir, "nodes.conf"),
			"--cluster-node-timeout", "1000",
			// A primary that streams its snapshot to new replicas
			// waits 5 s by default for more to come and share it.
			"--repl-diskless-sync-delay", "0"}
		if redis7() {
			// The cluster bus listens on the port plus 10000 unless
			// told: maybe in the kernel's ephemeral range, which any
			// outgoing connection may take (see storetest.Port).
			args = append(args, "--cluster-port", strconv.Itoa(storetest.Port(t)))
		}
		n.args = func() []string { return args }
		t.Cleanup(n.Kill)
		c.nodes = append(c.nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}
	for _, n := range c.nodes {
		n.Start()
	}
	// redis-cli waits for the nodes to agree, for ever if they do not.
	ctx, cancel := context.WithTimeout(context.Background(), storetest.Deadline)
	defer cancel()
	create := exec.CommandContext(ctx, "redis-cli", append(append([]string{"--cluster", "create"}, c.Addrs...),
		"--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitSettled()
	return c
}

// Options returns the options of a cluster client, as [Options] does for
// one server: a call is bounded by its context (ContextTimeoutEnabled)
// and each dial, read and write by [Patient]. The client asks the cluster
// who serves which slot every [ClusterReload] while it is in use.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: slices.Clone(c.Addrs),
		ContextTimeoutEnabled: true, DialTimeout: Patient, ReadTimeout: Patient, WriteTimeout: Patient,
		ClusterStateReloadInterval: ClusterReload}
}

// ClusterReload is how often the clients of [Cluster.Options] ask the
// cluster for its slots while in use. go-redis (v9.22.0) asks again when
// a node redirects it (MOVED), not when a node refuses its connections:
// after a failover, a client of the default options sends the dead
// primary's slots to it until its periodic reload, every 60 s (issue
// redis/go-redis#3979). Each reload is one CLUSTER SLOTS. (A
// redisstore.Store has its client reload when a call fails; the
// harness's own probes need this.)
const ClusterReload = time.Second

// Client returns a cluster client with [Cluster.Options], closed when
// the test ends. After a failover it finds the new primary of a slot by
// itself: it reloads the cluster's slots when a node fails or redirects
// it (MOVED).
func (c *Cluster) Client() *redis.ClusterClient {
	rdb := redis.NewClusterClient(c.Options())
	c.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Nodes returns the nodes, to kill, restart or pause. A restarted node
// rejoins the cluster (it kept its view in nodes.conf) empty: a former
// primary whose slots a replica took comes back as that one's replica.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// shard is the primary that serves a range of slots, as one node sees
// it.
type shard struct {
	start, end int
	primary    *Server
}

// view returns the shards that node n reports (CLUSTER SLOTS).
func (c *Cluster) view(n *Server) ([]shard, error) {
	rdb, ctx, cancel := n.poll()
	defer cancel()
	//lint:ignore SA1019 CLUSTER SHARDS, its successor, is Redis 7's; SLOTS also works before
	ss, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	var shards []shard
	for _, s := range ss {
		// The replicas that follow are left out while the cluster has
		// not heard of their replication offset, 0 until the primary
		// replicates a first write or ping: replicasOf asks them.
		if len(s.Nodes) == 0 {
			return nil, fmt.Errorf("node %s reports slots %d-%d without a primary", n.Addr, s.Start, s.End)
		}
		p := c.node(s.Nodes[0].Addr)
		if p == nil {
			return nil, fmt.Errorf("node %s reports a primary %s that is none of the test's", n.Addr, s.Nodes[0].Addr)
		}
		shards = append(shards, shard{start: s.Start, end: s.End, primary: p})
	}
	slices.SortFunc(shards, func(a, b shard) int { return a.start - b.start })
	return shards, nil
}

// node returns the node at addr, or nil.
func (c *Cluster) node(addr string) *Server {
	for _, n := range c.nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// agreed returns the shards that every running node reports, once they
// agree on each slot's primary and each node reports cluster_state:ok.
func (c *Cluster) agreed() ([]shard, bool) {
	var first []shard
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		if state, err := n.clusterInfo(); err != nil || state["cluster_state"] != "ok" {
			return nil, false
		}
		v, err := c.view(n)
		if err != nil {
			return nil, false
		}
		if first == nil {
			first = v
		} else if !slices.EqualFunc(first, v, func(a, b shard) bool {
			return a.start == b.start && a.end == b.end && a.primary == b.primary
		}) {
			return nil, false
		}
	}
	covered := 0
	for _, s := range first {
		covered += s.end - s.start + 1
	}
	return first, covered == slots
}

// replicasOf returns the running nodes that say they replicate p.
func (c *Cluster) replicasOf(p *Server) []*Server {
	var rs []*Server
	for _, n := range c.nodes {
		if n == p || !n.running() {
			continue
		}
		if f, err := n.info("replication"); err == nil && f["role"] == "slave" && net.JoinHostPort(f["master_host"], f["master_port"]) == p.Addr {
			rs = append(rs, n)
		}
	}
	return rs
}

// clusterInfo returns the fields of the node's CLUSTER INFO.
func (s *Server) clusterInfo() (map[string]string, error) {
	rdb, ctx, cancel := s.poll()
	defer cancel()
	text, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, err
	}
	return infoFields(text), nil
}

// WaitSettled waits until every running node reports cluster_state:ok,
// they agree on who serves each slot, and every other running node is in
// sync with one of the primaries that serve them: after the start, or
// after a node's restart.
func (c *Cluster) WaitSettled() {
	c.t.Helper()
	storetest.WaitFor(c.t, "the cluster to settle", func() bool {
		shards, ok := c.agreed()
		if !ok {
			return false
		}
		for _, n := range c.nodes {
			if !n.running() || slices.ContainsFunc(shards, func(s shard) bool { return s.primary == n }) {
				continue
			}
			f, err := n.info("replication")
			if err != nil || f["role"] != "slave" || f["master_link_status"] != "up" {
				return false
			}
			if p := c.node(net.JoinHostPort(f["master_host"], f["master_port"])); p == nil ||
				!slices.ContainsFunc(shards, func(s shard) bool { return s.primary == p }) {
				return false
			}
		}
		return true
	})
}

// shardOf returns the shard that serves key's slot once the nodes agree.
func (c *Cluster) shardOf(key string) shard {
	c.t.Helper()
	var sh shard
	storetest.WaitFor(c.t, "the nodes to agree on the primary of "+key, func() bool {
		shards, ok := c.agreed()
		if !ok {
			return false
		}
		sl := Slot(key)
		for _, s := range shards {
			if s.start <= sl && sl <= s.end {
				sh = s
				return true
			}
		}
		return false
	})
	return sh
}

// PrimaryFor returns the node that serves the slot of key as its
// primary, once the nodes agree.
func (c *Cluster) PrimaryFor(key string) *Server {
	c.t.Helper()
	return c.shardOf(key).primary
}

// ReplicasFor returns the running replicas of the primary of key's
// slot, once the nodes agree on it: the nodes that say they replicate it.
func (c *Cluster) ReplicasFor(key string) []*Server {
	c.t.Helper()
	return c.replicasOf(c.PrimaryFor(key))
}

// KillPrimaryFor kills the primary of key's slot (SIGKILL) and returns
// it; nothing restarts it. It returns once its running replicas have
// seen their link to it go down, so that a replica held by
// [Server.Stall] has lost what it held.
func (c *Cluster) KillPrimaryFor(key string) *Server {
	c.t.Helper()
	p := c.PrimaryFor(key)
	replicas := c.replicasOf(p)
	p.Kill()
	waitLinksDown(c.t, replicas)
	return p
}

// WaitFailover waits until a replica has replaced old, the primary of
// key's slot that [Cluster.KillPrimaryFor] killed: every running node
// reports cluster_state:ok and the same new primary for the slot, which
// takes a write (of a key of the slot named redistest:probe:N). It
// returns the new primary.
func (c *Cluster) WaitFailover(key string, old *Server) *Server {
	c.t.Helper()
	probe := probeKey(Slot(key))
	var p *Server
	storetest.WaitFor(c.t, "a replica to take over the slot of "+key+" from "+old.Addr, func() bool {
		shards, ok := c.agreed()
		if !ok {
			return false
		}
		for _, s := range shards {
			if s.start <= Slot(key) && Slot(key) <= s.end {
				p = s.primary
			}
		}
		if p == old || !p.running() {
			return false
		}
		rdb, ctx, cancel := p.poll()
		defer cancel()
		return rdb.Set(ctx, probe, p.Addr, 0).Err() == nil
	})
	return p
}

// probeKey returns a key of slot for the harness's writes.
func probeKey(slot int) string {
	for i := 0; ; i++ {
		if k := "redistest:probe:" + strconv.Itoa(i); Slot(k) == slot {
			return k
		}
	}
}

// Slot returns the hash slot of a key in a Redis Cluster: CRC16 of the
// key modulo 16384, or of its hash tag, the part between its first {
// and the first } after it, when that is not empty.
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return int(crc16(key) % slots)
}

// crc16 is the CRC16 of Redis Cluster (XMODEM: polynomial 0x1021,
// initial value 0).
func crc16(s string) uint16 {
	var crc uint16
	for i := range len(s) {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
