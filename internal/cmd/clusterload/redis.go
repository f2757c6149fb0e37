package main

import (
	"bufio"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sentinelMaster is the name the sentinels know the primary by.
const sentinelMaster = "mercure"

// clusterKey is the store's stream key in a Redis Cluster: its hash tag
// puts every key of the store in one slot, of one primary.
const clusterKey = "{mercure}"

// redisServer returns a Redis server, not started, on a free port, in a
// directory of its own under dir, with args added. It saves no snapshot;
// args say whether it keeps an append-only file.
func redisServer(name, dir string, args ...string) *server {
	s := &server{name: name, port: freePort(), dir: serverDir(dir, name), crash: syscall.SIGKILL}
	s.argv = append([]string{"redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log")}, args...)
	return s
}

// replicated are the arguments of the failover kinds' servers: they keep
// nothing on disk, so that a restarted one comes back empty and syncs
// from its primary; a primary sends its data to a new replica at once
// (by default it waits 5 s for others to share the transfer).
var replicated = []string{"--appendonly", "no", "--repl-diskless-sync-delay", "0"}

// replicasQuery adds replicas=1 to q when durable: each append is then
// acknowledged only once a replica has it (WAIT).
func replicasQuery(q url.Values, durable bool) string {
	if durable {
		q.Set("replicas", "1")
	}
	return q.Encode()
}

// startSentinel starts a primary, two replicas and three sentinels that
// watch them (quorum 2, the primary down once silent for a second), and
// waits until the sentinels see the replicas and each other.
func startSentinel(dir string, durable bool) *storeSet {
	primary := redisServer("primary", dir, replicated...)
	primary.start()
	st := &storeSet{kind: kindRedisSentinel, all: []*server{primary}, primary: primary}
	for i := 1; i <= 2; i++ {
		r := redisServer(fmt.Sprintf("replica %d", i), dir, slices.Concat(replicated, []string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.port)})...)
		r.start()
		st.all = append(st.all, r)
	}
	replicas := slices.Clone(st.all[1:])
	st.replica = replicas[0]
	st.synced = func() bool { return onlineReplicas(primary) == 2 }
	waitAll("the replicas to sync", 30*time.Second, st.synced)
	watchers := startSentinels(dir, primary)
	st.all = append(st.all, watchers...)
	st.rejoin = func() { rejoinSentinels(primary, replicas, watchers) }
	st.lag = func() func() {
		// Both replicas lag, so that with -durable no append is
		// acknowledged. Replica 2, paused last, may have acknowledged
		// what replica 1 lacks: it is the one promoted.
		prefer(replicas[1], watchers)
		return stall(replicas...)
	}
	var addrs []string
	for _, w := range watchers {
		addrs = append(addrs, w.addr())
	}
	st.url = "redis-sentinel://" + strings.Join(addrs, ",") + "/0?" + replicasQuery(url.Values{"master": {sentinelMaster}}, durable)
	return st
}

// startSentinels starts three sentinels that watch primary, and waits
// until they see its two replicas and each other.
func startSentinels(dir string, primary *server) []*server {
	var watchers []*server
	for i := 1; i <= 3; i++ {
		w := sentinelServer(fmt.Sprintf("sentinel %d", i), dir, primary)
		w.start()
		// Redis 7 lets a sentinel ask the servers' INFO every second
		// rather than every 10, and greet the other sentinels every
		// half second rather than 2: it learns sooner of replicas and
		// of the other sentinels. And it lets it connect again every
		// half second rather than every second: after a failover, a
		// sentinel waits for a reply from the new primary from the
		// switch on, but connects to it no sooner than a second after
		// its last try to reach the old one; down after a second of
		// silence, the new primary was sometimes taken for down before
		// the sentinel had asked it anything, and a second failover
		// promoted the other replica, which lost what the first new
		// primary had acknowledged (3 runs in 6 with -lag).
		redisCLI(w.port, "SENTINEL", "DEBUG", "info-period", "1000", "publish-period", "500", "ping-period", "500")
		watchers = append(watchers, w)
	}
	waitAll("the sentinels to see the replicas and each other", 30*time.Second, func() bool { return sentinelsSettled(watchers) })
	return watchers
}

// rejoinSentinels starts the killed primary again as a replica of the
// one the sentinels promoted, once they did: started as the empty
// primary it was, it would be one until they noticed.
func rejoinSentinels(primary *server, replicas, watchers []*server) {
	var addr string
	waitAll("the sentinels to promote a replica", 60*time.Second, func() bool {
		addr = sentinelsPrimary(watchers)
		return addr != "" && addr != primary.addr()
	})
	if r := byAddr(replicas, addr); r != nil {
		log.Printf("the sentinels promoted %s", r.name)
	}
	host, port, _ := net.SplitHostPort(addr)
	primary.argv = slices.Concat(primary.argv, []string{"--replicaof", host, port})
	primary.start()
}

// prefer makes the sentinels promote replica r rather than another one
// at the next failover, however far behind it is: it gives r the
// replica-priority 1 (lower is preferred; the others keep the default
// 100, and 0 would bar r), and returns once every sentinel has seen it
// in r's INFO. A sentinel picks among the replicas that answer it by
// priority, then by replication offset (the furthest ahead, by the
// offsets it last heard, which a paused replica stops reporting), then
// by run id. A restart of r forgets the priority.
func prefer(r *server, watchers []*server) {
	if out, err := redisCLI(r.port, "CONFIG", "SET", "replica-priority", "1"); err != nil || out != "OK" {
		fatalf("CONFIG SET replica-priority 1 on %s: %q %v", r.name, out, err)
	}
	waitAll("the sentinels to see the priority of "+r.name, 30*time.Second, func() bool {
		for _, w := range watchers {
			out, err := redisCLI(w.port, "SENTINEL", "REPLICAS", sentinelMaster)
			if err != nil || replicaPriority(out, r.addr()) != "1" {
				return false
			}
		}
		return true
	})
}

// replicaPriority returns the slave-priority of the replica at addr in
// the answer to SENTINEL REPLICAS, as redis-cli prints it to a pipe: each
// replica's fields, name first, a key line then its value line; "" if
// addr is not there.
func replicaPriority(text, addr string) string {
	var replicas []map[string]string
	lines := strings.Split(strings.ReplaceAll(text, "\r", ""), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		if lines[i] == "name" {
			replicas = append(replicas, map[string]string{})
		}
		if len(replicas) > 0 {
			replicas[len(replicas)-1][lines[i]] = lines[i+1]
		}
	}
	for _, r := range replicas {
		if r["name"] == addr {
			return r["slave-priority"]
		}
	}
	return ""
}

// stall makes each of replicas, one after the other, hold its primary's
// writes without applying them: CLIENT PAUSE WRITE pauses the
// replication link too. A replica then reads the writes but does not
// apply them, nor acknowledges them (WAIT does not count it), and drops
// them when its link to the primary closes. (A replica stopped, SIGSTOP
// or DEBUG SLEEP, would lose nothing: the writes would wait in the
// kernel's socket buffer, and be applied before the end of the link.)
// The pause is bounded, in case the run ends before the release.
//
// It returns the release, to call once the primary was sent its crash:
// it waits until each replica has seen its link go down, then ends the
// pauses. A paused replica answers INFO but not the PUBLISH of a
// sentinel's hello messages: a sentinel takes a replica paused for two
// seconds for down, and promotes none of them until it answers again.
//
// The pauses go on connections opened beforehand, not with redis-cli,
// whose start takes tens of milliseconds on a busy machine: the lag
// then begins when stall returns, within a millisecond, and the updates
// acknowledged in the lag's window are those the failover loses.
func stall(replicas ...*server) (release func()) {
	bound := fmt.Sprint(time.Minute.Milliseconds())
	conns := make([]net.Conn, len(replicas))
	for i, r := range replicas {
		c, err := net.DialTimeout("tcp", r.addr(), 5*time.Second)
		check(err)
		defer c.Close()
		conns[i] = c
	}
	for i, r := range replicas {
		if out, err := redisDo(conns[i], "CLIENT", "PAUSE", bound, "WRITE"); err != nil || out != "+OK" {
			fatalf("CLIENT PAUSE on %s: %q %v", r.name, out, err)
		}
	}
	return func() {
		for _, r := range replicas {
			waitAll(r.name+" to see its primary die", 30*time.Second, func() bool {
				out, err := redisCLI(r.port, "INFO", "replication")
				return err == nil && infoFields(out)["master_link_status"] == "down"
			})
		}
		for _, r := range replicas {
			if out, err := redisCLI(r.port, "CLIENT", "UNPAUSE"); err != nil || out != "OK" {
				fatalf("CLIENT UNPAUSE on %s: %q %v", r.name, out, err)
			}
		}
	}
}

// sentinelServer returns a sentinel, not started, that watches primary:
// it takes the primary for down after a second of silence, two sentinels
// must agree, and a failover that stalls is tried again after 3 s.
func sentinelServer(name, dir string, primary *server) *server {
	s := &server{name: name, port: freePort(), dir: serverDir(dir, name), crash: syscall.SIGKILL}
	conf := filepath.Join(s.dir, "sentinel.conf") // the sentinel rewrites it
	text := fmt.Sprintf(`port %[1]d
bind 127.0.0.1
daemonize no
dir %[2]s
logfile %[2]s/sentinel.log
sentinel monitor %[3]s 127.0.0.1 %[4]d 2
sentinel down-after-milliseconds %[3]s 1000
sentinel failover-timeout %[3]s 3000
`, s.port, s.dir, sentinelMaster, primary.port)
	check(os.WriteFile(conf, []byte(text), 0o644))
	s.argv = []string{"redis-server", conf, "--sentinel"}
	return s
}

// sentinelsSettled reports whether each sentinel sees two replicas and
// two other sentinels: a failover can then happen.
func sentinelsSettled(watchers []*server) bool {
	for _, w := range watchers {
		out, err := redisCLI(w.port, "SENTINEL", "MASTER", sentinelMaster)
		if err != nil {
			return false
		}
		m := flatPairs(out)
		if m["num-slaves"] != "2" || m["num-other-sentinels"] != "2" {
			return false
		}
	}
	return true
}

// sentinelsPrimary returns the address of the primary that every
// sentinel reports, "" until they agree.
func sentinelsPrimary(watchers []*server) string {
	agreed := ""
	for _, w := range watchers {
		out, err := redisCLI(w.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinelMaster)
		hp := strings.Fields(out)
		if err != nil || len(hp) != 2 || (agreed != "" && agreed != net.JoinHostPort(hp[0], hp[1])) {
			return ""
		}
		agreed = net.JoinHostPort(hp[0], hp[1])
	}
	return agreed
}

// startCluster starts a Redis Cluster of six nodes, three primaries with
// a replica each (a node takes another for failing after a second of
// silence), and waits until every node agrees on who serves the store's
// slot and its replica is in sync.
func startCluster(dir string, durable bool) *storeSet {
	st := &storeSet{kind: kindRedisCluster}
	var addrs []string
	for i := 1; i <= 6; i++ {
		// The cluster bus listens on the port plus 10000 unless told:
		// maybe a port taken, or in the ephemeral range.
		n := redisServer(fmt.Sprintf("node %d", i), dir, slices.Concat(replicated, []string{"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000", "--cluster-port", strconv.Itoa(freePort())})...)
		n.start()
		st.all = append(st.all, n)
		addrs = append(addrs, n.addr())
	}
	slot := createCluster(addrs, st.all[0].port)
	waitAll("the cluster to agree on the store's slot", 60*time.Second, func() bool {
		var ok bool
		st.primary, st.replica, ok = clusterSettled(st.all, slot)
		return ok
	})
	st.synced = func() bool { return onlineReplicas(st.primary) == 1 }
	st.rejoin = func() {
		// Its view of the cluster (nodes.conf) makes it a replica of
		// the node that took its slots.
		waitAll("the replica to take over the store's slot", 60*time.Second, func() bool { return role(st.replica) == "master" })
		st.primary.start()
	}
	st.lag = func() func() { return stall(st.replica) }
	waitAll("the store's primary's replica to sync", 30*time.Second, st.synced)
	st.url = "redis-cluster://" + strings.Join(addrs, ",") + "?" + replicasQuery(url.Values{"stream": {clusterKey}}, durable)
	return st
}

// createCluster joins the nodes at addrs into a cluster, three primaries
// and a replica of each, and returns the slot of the store's key as the
// node on port computes it.
func createCluster(addrs []string, port int) int {
	create := exec.Command("redis-cli", slices.Concat([]string{"--cluster", "create"}, addrs, []string{"--cluster-replicas", "1", "--cluster-yes"})...)
	if out, err := create.CombinedOutput(); err != nil {
		fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	out, err := redisCLI(port, "CLUSTER", "KEYSLOT", clusterKey)
	slot, err2 := strconv.Atoi(out)
	if err != nil || err2 != nil {
		fatalf("CLUSTER KEYSLOT %s: %q %v", clusterKey, out, err)
	}
	return slot
}

// clusterSettled returns the node that serves slot and its replica, once
// every node reports cluster_state:ok and names the same two.
func clusterSettled(nodes []*server, slot int) (primary, replica *server, ok bool) {
	var p, r string
	for _, n := range nodes {
		info, err := redisCLI(n.port, "CLUSTER", "INFO")
		if err != nil || infoFields(info)["cluster_state"] != "ok" {
			return nil, nil, false
		}
		text, err := redisCLI(n.port, "CLUSTER", "NODES")
		if err != nil {
			return nil, nil, false
		}
		np, nr, found := shardOf(parseClusterNodes(text), slot)
		if !found || (p != "" && (np != p || nr != r)) {
			return nil, nil, false
		}
		p, r = np, nr
	}
	return byAddr(nodes, p), byAddr(nodes, r), byAddr(nodes, p) != nil && byAddr(nodes, r) != nil
}

// byAddr returns the server at addr, or nil.
func byAddr(servers []*server, addr string) *server {
	for _, s := range servers {
		if s.addr() == addr {
			return s
		}
	}
	return nil
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	id, addr string
	flags    []string
	master   string   // the id of its primary, for a replica
	slots    [][2]int // the ranges of slots it serves, ends included
}

// parseClusterNodes parses the answer to CLUSTER NODES: id,
// HOST:PORT@BUSPORT[,HOSTNAME], flags, primary's id, ping and pong
// times, epoch, link state, then slots or ranges of slots (those in
// brackets are being moved, and skipped).
func parseClusterNodes(text string) []clusterNode {
	var nodes []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3]}
		for _, r := range f[8:] {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, [2]int{a, b})
			}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// has reports whether the node has flag.
func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

// failing reports whether the node is taken, or suspected, for failing.
func (n clusterNode) failing() bool { return n.has("fail") || n.has("fail?") || n.has("noaddr") }

// shardOf returns the addresses of the primary that serves slot and of
// a replica of it, neither failing, as nodes report them.
func shardOf(nodes []clusterNode, slot int) (primary, replica string, ok bool) {
	for _, p := range nodes {
		if !p.has("master") || p.failing() || !serves(p, slot) {
			continue
		}
		for _, r := range nodes {
			if r.has("slave") && r.master == p.id && !r.failing() {
				return p.addr, r.addr, true
			}
		}
	}
	return "", "", false
}

// serves reports whether n serves slot.
func serves(n clusterNode, slot int) bool {
	for _, r := range n.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// onlineReplicas returns how many replicas primary reports in sync
// (INFO replication: state=online).
func onlineReplicas(primary *server) int {
	out, err := redisCLI(primary.port, "INFO", "replication")
	if err != nil {
		return 0
	}
	return countOnline(infoFields(out))
}

// countOnline counts the replicas in sync in the fields of a primary's
// INFO replication: slaveN:ip=…,port=…,state=online,….
func countOnline(fields map[string]string) int {
	n := 0
	for k, v := range fields {
		if strings.HasPrefix(k, "slave") && strings.Contains(v, "state=online") {
			n++
		}
	}
	return n
}

// role returns the role that s reports: master or slave ("" if it does
// not answer).
func role(s *server) string {
	out, err := redisCLI(s.port, "INFO", "replication")
	if err != nil {
		return ""
	}
	return infoFields(out)["role"]
}

// redisCLI runs a command on the Redis server on port with redis-cli,
// and returns its answer as redis-cli prints it to a pipe: a value a
// line.
func redisCLI(port int, args ...string) (string, error) {
	out, err := exec.Command("redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

// redisDo sends a command on c, a connection to a Redis server, and
// returns the first line of its answer: +OK, say, or -ERR ….
func redisDo(c net.Conn, args ...string) (string, error) {
	check(c.SetDeadline(time.Now().Add(5 * time.Second)))
	if _, err := c.Write(respCommand(args...)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\r\n"), err
}

// respCommand returns args as Redis reads a command: a RESP array of
// bulk strings.
func respCommand(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// infoFields parses the key:value lines of an INFO answer.
func infoFields(text string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

// flatPairs parses a map answer as redis-cli prints it to a pipe: a key
// line, then its value line.
func flatPairs(text string) map[string]string {
	lines := strings.Split(strings.ReplaceAll(text, "\r", ""), "\n")
	m := map[string]string{}
	for i := 0; i+1 < len(lines); i += 2 {
		m[lines[i]] = lines[i+1]
	}
	return m
}
