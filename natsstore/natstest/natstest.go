// Package natstest runs nats-server processes with JetStream for the
// tests of natsstore and of programs that use it: a single server, or a
// cluster of three whose members a test kills (SIGKILL) and restarts,
// with their data or without (Wipe), or pauses (SIGSTOP, on Unix).
// It needs the nats-server binary, named by MERCURE_TEST_NATS (a path,
// or "1" for the one on PATH); the tests skip without it. CI installs it
// from the Go module proxy (go install
// github.com/nats-io/nats-server/v2@v2.15.3), the version that package
// natsembed embeds.
package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/storetest"
)

// Patient bounds what a healthy server takes, even on a machine loaded
// with CPU hogs and other test packages.
const Patient = time.Minute

var want = storetest.Want{
	What: "a nats-server binary",
	How:  "set MERCURE_TEST_NATS=1 with nats-server on PATH, or to its path (go install github.com/nats-io/nats-server/v2@v2.15.3)",
}

// Binary returns the path of the nats-server binary, or skips t.
func Binary(t testing.TB) string {
	t.Helper()
	v := os.Getenv("MERCURE_TEST_NATS")
	if v == "" {
		storetest.Skip(t, want)
	}
	if v == "1" {
		v = "nats-server"
	}
	path, err := exec.LookPath(v)
	if err != nil {
		t.Fatalf("MERCURE_TEST_NATS=%s: %v", os.Getenv("MERCURE_TEST_NATS"), err)
	}
	return path
}

// Server is a nats-server process of a test's own.
type Server struct {
	// URL is the address of its client listener, nats://127.0.0.1:PORT.
	URL string
	// Name is its server name.
	Name string
	// Cluster is the address of its cluster listener, "" for a single
	// server.
	Cluster string

	t      testing.TB
	bin    string
	dir    string
	port   int
	routes []string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts a single nats-server with JetStream (file storage) on a
// free loopback port. It is killed when the test ends; [Server.Kill] and
// [Server.Restart] crash and restart it with its data.
func Start(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, "single")
	s.start()
	return s
}

func newServer(t testing.TB, name string) *Server {
	t.Helper()
	port := storetest.Port(t)
	s := &Server{t: t, bin: Binary(t), dir: storetest.TempDir(t), port: port, Name: name,
		URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	t.Cleanup(s.Kill)
	return s
}

// StartCluster starts a cluster of three nats-servers with JetStream,
// each routed to the others, and returns once it has a JetStream meta
// leader. They are killed when the test ends.
func StartCluster(t testing.TB) []*Server {
	t.Helper()
	var ss []*Server
	var routes []string
	for i := range 3 {
		s := newServer(t, fmt.Sprintf("n%d", i+1))
		s.Cluster = storetest.Addr(t)
		routes = append(routes, "nats-route://"+s.Cluster)
		ss = append(ss, s)
	}
	for _, s := range ss {
		s.routes = routes
		s.start()
	}
	WaitMeta(t, ss...)
	return ss
}

// URLs returns the client URLs of ss, comma-separated, for nats.Connect.
func URLs(ss ...*Server) string {
	var u []string
	for _, s := range ss {
		u = append(u, s.URL)
	}
	return strings.Join(u, ",")
}

func (s *Server) start() {
	s.t.Helper()
	args := []string{"-js", "-sd", filepath.Join(s.dir, "js"), "-a", "127.0.0.1", "-p", strconv.Itoa(s.port),
		"-n", s.Name, "--no_advertise"}
	if s.Cluster != "" {
		host, port, _ := net.SplitHostPort(s.Cluster)
		args = append(args, "--cluster_name", "mercure-test", "--cluster", "nats://"+net.JoinHostPort(host, port),
			"--routes", strings.Join(s.routes, ","), "--cluster_advertise", s.Cluster)
	}
	cmd := exec.Command(s.bin, args...)
	log, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatalf("nats-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if !storetest.Within(Patient, func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		s.t.Fatalf("nats-server %s did not listen in %v: %s", s.Name, Patient, s.Log())
	}
}

// Log returns what the server logged.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return string(b)
}

// Kill stops the server as a crash does (SIGKILL), and waits for it.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Restart starts the killed server again, with its data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.start()
}

// Wipe removes the data of the killed server (its JetStream store
// directory), so that [Server.Restart] starts it empty, as a server
// whose disk was lost. It fails t if the server runs.
func (s *Server) Wipe(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		t.Fatalf("natstest: Wipe of %s, which runs: Kill it first", s.Name)
	}
	if err := os.RemoveAll(filepath.Join(s.dir, "js")); err != nil {
		t.Fatal(err)
	}
}

// Leader returns the server of ss that leads the stream name (its
// Raft leader, as the stream's info names it), asking through nc; it
// fails t if none does within [Patient].
func Leader(t testing.TB, nc *nats.Conn, name string, ss ...*Server) *Server {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var leader *Server
	var last error
	if !storetest.Within(Patient, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, name)
		if err != nil {
			last = err
			return false
		}
		info := st.CachedInfo()
		if info.Cluster == nil {
			last = fmt.Errorf("stream %s has no cluster info", name)
			return false
		}
		for _, s := range ss {
			if s.Name == info.Cluster.Leader {
				leader = s
				return true
			}
		}
		last = fmt.Errorf("stream %s led by %q", name, info.Cluster.Leader)
		return false
	}) {
		t.Fatalf("natstest: no leader of stream %s among the servers in %v: %v", name, Patient, last)
	}
	return leader
}

// Connect returns a connection to ss (every one of them), closed when
// the test ends. It reconnects forever, every 50 ms, so that a test sees
// a restarted server soon.
func Connect(t testing.TB, ss ...*Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(URLs(ss...), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.Timeout(Patient), nats.ReconnectJitter(0, 0), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatalf("nats connect %s: %v", URLs(ss...), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// WaitMeta waits until the servers ss answer JetStream requests: a meta
// leader is elected.
func WaitMeta(t testing.TB, ss ...*Server) {
	t.Helper()
	nc := Connect(t, ss...)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var last error
	if !storetest.Within(Patient, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, last = js.AccountInfo(ctx)
		return last == nil
	}) {
		t.Fatalf("JetStream not ready in %v: %v", Patient, last)
	}
	nc.Close()
}

// Shared is a nats-server for many tests of one test binary, each on
// streams of its own: started by [StartShared] outside any test, stopped
// by its Stop.
type Shared struct {
	// URL is the address of its client listener.
	URL string
	cmd *exec.Cmd
	dir string
}

// StartShared starts a nats-server with JetStream on a port of the
// kernel's choosing, with its data in a temporary directory; it returns
// nil and no error without MERCURE_TEST_NATS (the tests that use it
// skip). Call it from TestMain, and Stop once the tests ran.
func StartShared() (*Shared, error) {
	bin := os.Getenv("MERCURE_TEST_NATS")
	if bin == "" {
		return nil, nil
	}
	if bin == "1" {
		bin = "nats-server"
	}
	dir, err := os.MkdirTemp("", "natstest-")
	if err != nil {
		return nil, err
	}
	s := &Shared{dir: dir}
	cmd := exec.Command(bin, "-js", "-sd", filepath.Join(dir, "js"), "-a", "127.0.0.1", "-p", "-1",
		"--ports_file_dir", dir, "-n", "shared")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	s.cmd = cmd
	ports := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(bin), cmd.Process.Pid))
	deadline := time.Now().Add(Patient)
	for time.Now().Before(deadline) {
		var p struct {
			Nats []string `json:"nats"`
		}
		if b, err := os.ReadFile(ports); err == nil && json.Unmarshal(b, &p) == nil && len(p.Nats) > 0 {
			s.URL = p.Nats[0]
			return s, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("nats-server did not write %s in %v", ports, Patient)
}

// Stop kills the server and removes its data.
func (s *Shared) Stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	os.RemoveAll(s.dir)
}
