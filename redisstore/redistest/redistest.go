// Package redistest runs redis-server processes for the tests of
// redisstore and of programs that use it: a test may kill and restart its
// own server without disturbing the shared one named by MERCURE_TEST_REDIS.
// It also runs the topologies where a replica takes over from a primary
// that fails: a primary and replicas watched by sentinels
// ([StartSentinel]), and a Redis Cluster ([StartCluster]). It needs
// redis-server on a unix system (and redis-cli for a cluster).
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure/storetest"
)

// Patient bounds each dial, read and write of a client of [Options]: far
// longer than a healthy server takes, even on a machine loaded with CPU
// hogs and other test packages.
const Patient = time.Minute

// Options returns the options of a client of addr for tests that do not
// test timeouts: a call is bounded by its context (ContextTimeoutEnabled,
// as the stores want) and each dial, read and write by [Patient].
// go-redis's defaults of 5 s, which apply beside the context's deadline,
// once failed a round trip to a healthy server beside two CPU hogs.
func Options(addr string) *redis.Options {
	return &redis.Options{Addr: addr, ContextTimeoutEnabled: true,
		DialTimeout: Patient, ReadTimeout: Patient, WriteTimeout: Patient}
}

// Server is a redis-server process of a test's own.
type Server struct {
	// Addr is the server's address, HOST:PORT on loopback.
	Addr    string
	t       *testing.T
	dir     string
	persist bool
	cmd     *exec.Cmd
	// conf, when set, is the configuration file of a sentinel, which
	// runs in sentinel mode (see [StartSentinel]).
	conf string
	// args, when set, returns more arguments at each start: a replica's
	// primary, which a failover changes, or the cluster's settings.
	args func() []string
	// paused is set between Pause and Resume: the waits that ask every
	// server of a topology skip it, which would not answer.
	paused bool
	// poller is the harness's own client of the server, for its polls;
	// made at the first (see [Server.poll]).
	poller *redis.Client
}

// Start starts a redis-server on a free loopback port. With persist,
// it logs every write to an append-only file and fsyncs it before
// replying (appendfsync always), so that a kill loses no acknowledged
// write (to the kernel: its files are scratch, in memory where there is
// room); without, a restart empties it. The server is killed when the test
// ends. Like every Redis test, it skips unless MERCURE_TEST_REDIS is set
// (CI sets it and installs redis-server); it also skips when the
// redis-server binary is missing.
func Start(t *testing.T, persist bool) *Server {
	t.Helper()
	needServer(t) // like every Redis test, this one needs MERCURE_TEST_REDIS
	// A port the kernel would not give an outgoing connection: free
	// again for the restart after a kill.
	s := &Server{t: t, Addr: storetest.Addr(t), dir: storetest.TempDir(t), persist: persist}
	t.Cleanup(s.Kill) // first: a start that fails its wait kills it too
	s.Start()
	return s
}

// needServer skips t as [Start] does: without MERCURE_TEST_REDIS, or
// without the redis-server binary.
func needServer(t *testing.T) {
	t.Helper()
	Addr(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		storetest.Skip(t, storetest.Want{What: "redis-server", How: "install it (Debian package redis-server)"})
	}
}

// Start starts the killed server again, on the same port and directory,
// and waits until it answers.
func (s *Server) Start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	var args []string
	if s.conf != "" {
		args = []string{s.conf, "--sentinel"}
	}
	args = append(args, "--port", port, "--bind", "127.0.0.1", "--dir", s.dir, "--save", "", "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	if s.persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if debugOff() {
		args = append(args, "--enable-debug-command", "local") // for Busy
	}
	if s.args != nil {
		args = append(args, s.args()...)
	}
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	var err error
	pid := "process_id:" + strconv.Itoa(s.cmd.Process.Pid) + "\r\n"
	if !storetest.Within(storetest.Deadline, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		// This process's server, not another one on the port (which
		// this one, failing to listen, would leave answering).
		var info string
		if info, err = rdb.Info(ctx, "server").Result(); err == nil && !strings.Contains(info, pid) {
			err = fmt.Errorf("another process answers on %s", s.Addr)
		}
		return err == nil
	}) {
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		s.t.Fatalf("redis-server on %s did not start: %v\n%s", s.Addr, err, log)
	}
}

// Kill stops the server at once, as a crash would (SIGKILL).
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.Resume() // a paused process dies too
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Busy keeps the server busy for d, as a slow script or a large deletion
// would: it answers no client meanwhile, and holds its connections. It
// returns when the server is done. (DEBUG SLEEP: a script's busy loop
// would do the same at the cost of a CPU for d.)
func (s *Server) Busy(d time.Duration) {
	s.t.Helper()
	rdb := s.Client()
	if err := rdb.Do(context.Background(), "DEBUG", "SLEEP", fmt.Sprintf("%.3f", d.Seconds())).Err(); err != nil {
		s.t.Fatalf("DEBUG SLEEP: %v", err)
	}
}

// debugOff reports whether redis-server disables the DEBUG command by
// default, so that Start must enable it for Busy: Redis 7 does, and does
// not know the option that enables it before.
func debugOff() bool { return redis7() }

// redis7 reports whether redis-server is Redis 7 or later (or says no
// version it can read: one of today, then).
var redis7 = sync.OnceValue(func() bool {
	out, err := exec.Command("redis-server", "--version").Output()
	m := regexp.MustCompile(`v=(\d+)\.`).FindSubmatch(out)
	if err != nil || m == nil {
		return true
	}
	major, _ := strconv.Atoi(string(m[1]))
	return major >= 7
})

// Restart kills the server and starts it again.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.Start()
}

// Client returns a client of the server with [Options], closed when the
// test ends.
func (s *Server) Client() *redis.Client {
	rdb := redis.NewClient(Options(s.Addr))
	s.t.Cleanup(func() { rdb.Close() })
	return rdb
}
