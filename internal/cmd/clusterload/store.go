package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Store kinds: the outage kinds are one server, killed and restarted;
// the failover kinds a primary and its replicas, the primary killed and
// a replica promoted.
const (
	kindRedis           = "redis"
	kindPostgres        = "postgres"
	kindRedisSentinel   = "redis-sentinel"
	kindRedisCluster    = "redis-cluster"
	kindPostgresStandby = "postgres-standby"
	// kindNATS is three nats-server processes with JetStream, the stream
	// kept by the three; kindNATSEmbed no server at all, the hubs' own
	// embedded NATS nodes (standalone -nats-embed) forming the cluster.
	kindNATS      = "nats"
	kindNATSEmbed = "nats-embed"
)

// failoverKind reports whether kind is a failover kind.
func failoverKind(kind string) bool {
	return kind == kindRedisSentinel || kind == kindRedisCluster || kind == kindPostgresStandby
}

// storeSet is the run's store: its servers, the URL the hubs reach them
// by, and which the schedule kills.
type storeSet struct {
	kind string
	url  string    // the hubs' -store
	all  []*server // every process, killed at the end
	// primary is the server the hubs write to: the outage kinds' only
	// one.
	primary *server
	// replica is the one the failover schedule kills and restarts; nil
	// for the outage kinds.
	replica *server
	// promote makes a replica the primary once the primary was killed;
	// nil where the store's own watchers do it (Sentinel, Cluster).
	promote func()
	// rejoin starts the killed primary again, once a replica took
	// over, as a replica of that one, as a supervisor restarts a
	// crashed server; nil where it stays down (PostgreSQL: its timeline
	// left the promoted standby's, and would need pg_rewind).
	rejoin func()
	// synced reports whether every replica follows the primary: the
	// failover schedule waits for it before the primary's kill, so that
	// the restarted replica is back.
	synced func() bool
	// lag makes the replica that will take over stop receiving the
	// primary's writes (-lag), and returns release, which the failover
	// calls once the primary was sent its crash (server.signalCrash) and
	// before it waits for its end: release returns once that replica has
	// lost for good what it did not receive, and lets it go on. nil for
	// the outage kinds.
	lag func() (release func())
	// leader returns the server the store's event kills and restarts,
	// when it depends on the moment (NATS: the stream's leader); nil
	// otherwise.
	leader func() *server
	// hubArgs returns the flags of hub i of n, instead of -store url;
	// nil otherwise. Such hubs start together (an embedded NATS node
	// waits for the others before its hub listens).
	hubArgs func(i, n int) []string
}

// startStore starts a store of kind, its data under dir; durable makes
// its replication synchronous (PostgreSQL) or the hubs' appends wait for
// a replica (Redis); natsBin is the nats-server program.
func startStore(kind, dir string, durable bool, natsBin string) *storeSet {
	switch kind {
	case kindNATS:
		return startNATS(dir, natsBin)
	case kindNATSEmbed:
		return embeddedNATS(dir)
	case kindRedis:
		s := redisServer("redis", dir, "--appendonly", "yes", "--appendfsync", "always")
		s.start()
		return &storeSet{kind: kind, url: fmt.Sprintf("redis://%s/0", s.addr()), all: []*server{s}, primary: s}
	case kindPostgres:
		s := postgresServer("postgres", dir, "data")
		s.initdb()
		s.start()
		return &storeSet{kind: kind, url: postgresURL(s), all: []*server{s}, primary: s}
	case kindPostgresStandby:
		return startStandby(dir, durable)
	case kindRedisSentinel:
		return startSentinel(dir, durable)
	case kindRedisCluster:
		return startCluster(dir, durable)
	}
	fatalf("-store %q: want %s, %s, %s, %s, %s, %s or %s", kind, kindRedis, kindPostgres, kindRedisSentinel, kindRedisCluster,
		kindPostgresStandby, kindNATS, kindNATSEmbed)
	return nil
}

// close kills every server of the store.
func (st *storeSet) close() {
	for _, s := range st.all {
		s.kill()
	}
}

// server is one server process of the run's store, started again with
// the same command line after a kill.
type server struct {
	name string // for the log
	port int
	dir  string // its working directory
	data string // PostgreSQL's data directory
	argv []string
	sys  *syscall.SysProcAttr // nil, or to run as postgres
	// crash is what kill sends: SIGKILL for Redis, SIGQUIT for
	// PostgreSQL (an immediate shutdown: no checkpoint, as a crash).
	crash syscall.Signal
	// settle is how long start waits after the server listens:
	// PostgreSQL's recovery follows its listen.
	settle time.Duration
	cmd    *exec.Cmd
}

// addr returns the server's HOST:PORT.
func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// command returns a command that runs in the server's directory, as the
// server's user.
func (s *server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = s.sys
	return cmd
}

// start starts the server and waits until it accepts connections. Its
// output goes to a file in its directory.
func (s *server) start() {
	s.cmd = s.command(s.argv[0], s.argv[1:]...)
	log := filepath.Join(s.dir, strings.ReplaceAll(s.name, " ", "-")+".log")
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	check(err)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	check(s.cmd.Start())
	out.Close()
	cmd := s.cmd
	atExit(func() { cmd.Process.Kill() })
	waitAll(s.name+" to listen", 30*time.Second, func() bool {
		c, err := net.Dial("tcp", s.addr())
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	time.Sleep(s.settle)
}

// kill stops the server as a crash would (see crash), and waits for it.
func (s *server) kill() {
	s.signalCrash()
	s.reap()
}

// signalCrash sends the server its crash (see crash), and returns
// without waiting for its end.
func (s *server) signalCrash() {
	if s.cmd == nil {
		return
	}
	if s.crash == syscall.SIGKILL {
		s.cmd.Process.Kill()
	} else {
		s.cmd.Process.Signal(s.crash)
	}
}

// reap waits for the end of the server, sent its crash.
func (s *server) reap() {
	if s.cmd == nil {
		return
	}
	s.cmd.Wait()
	s.cmd = nil
}

// serverDir makes a directory of its own for a Redis server under dir:
// a server writes its log there, a cluster node its view of the cluster
// and a sentinel its configuration.
func serverDir(dir, name string) string {
	d := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
	check(os.Mkdir(d, 0o755))
	return d
}
