// Package pgtest runs throwaway PostgreSQL clusters for tests: a test may
// kill and restart its own server without disturbing the shared one named
// by MERCURE_TEST_POSTGRES.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mercurekit/mercure/internal/skips"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Env names the variable holding the DSN of the shared test server.
const Env = "MERCURE_TEST_POSTGRES"

// Want is what the PostgreSQL tests skip for want of, for [skips.Report].
var Want = skips.Want{What: "a PostgreSQL server",
	How: "set " + Env + " to a DSN (such as postgres://postgres@127.0.0.1:6432/postgres?sslmode=disable)"}

// DSN returns the DSN of the shared test server, or skips t, counting the
// skip for [skips.Report].
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(Env)
	if dsn == "" {
		skips.Skip(t, Want)
	}
	return dsn
}

// Bin returns the path of a PostgreSQL server program: from PATH, or from
// Debian's /usr/lib/postgresql/*/bin (newest first), "" if none.
func Bin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// Server is a postgres process of a test's own.
type Server struct {
	// DSN connects to the server's database "postgres" as user postgres.
	DSN  string
	Port int
	t    testing.TB
	dir  string
	cred *syscall.Credential
	cmd  *exec.Cmd
}

// Start initialises a cluster in a temporary directory and starts it on a
// free loopback port; it is killed and removed when the test ends. Like
// every PostgreSQL test it skips unless MERCURE_TEST_POSTGRES is set, and
// when initdb is not installed (Debian package postgresql). Run as root,
// the server runs as the user postgres, which PostgreSQL requires.
func Start(t testing.TB) *Server {
	t.Helper()
	DSN(t)
	initdb := Bin("initdb")
	if initdb == "" || Bin("postgres") == "" {
		skips.Skip(t, skips.Want{What: "initdb", How: "install PostgreSQL's server programs (Debian package postgresql)"})
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{t: t, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			skips.Skip(t, skips.Want{What: "a user postgres to run the server as (root cannot)", How: "create it, or run the tests as another user"})
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	cmd := s.command(initdb, "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// Start starts the killed server again, on the same port and data, and
// waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	logf, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = s.command(Bin("postgres"), "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.Port), "-c", "listen_addresses=127.0.0.1", "-k", s.dir,
		"-c", "max_connections=200")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	if !testwait.Within(testwait.Deadline, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var c *pgx.Conn
		if c, err = pgx.Connect(ctx, s.DSN); err != nil {
			return false
		}
		c.Close(ctx)
		return true
	}) {
		log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
		s.t.Fatalf("postgres on port %d did not start: %v\n%s", s.Port, err, log)
	}
}

// Kill stops the server at once, as a crash would: immediate shutdown
// (SIGQUIT), which ends every backend without a checkpoint, so that the
// next start recovers from the WAL. (A SIGKILL of the postmaster would
// leave its backends running, holding the port and shared memory.)
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Signal(syscall.SIGQUIT)
	s.cmd.Wait()
	s.cmd = nil
}

// Stop shuts the server down cleanly (fast mode: connections are closed).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	s.cmd.Wait()
	s.cmd = nil
}

// Restart kills the server (see Kill) and starts it again.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.Start()
}
