// Package pgtest runs throwaway PostgreSQL clusters for the tests of
// pgstore and of programs that use it: a test may kill and restart its own
// server without disturbing the shared one named by MERCURE_TEST_POSTGRES,
// or stage a failover to a standby of it (see Server.StartStandby).
// It needs PostgreSQL's server programs (initdb, postgres, and
// pg_basebackup for a standby) on a unix system.
//
// A cluster is a copy of a template that initdb makes once for the
// installed server and keeps for later runs (mercure-pgtest-*), as Go
// keeps its build cache: an initdb costs a second of CPU, a copy a tenth
// of that. Both live in memory (/dev/shm) where there is room, else in
// the temporary directory (see storetest.ScratchDir).
package pgtest

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mercurekit/mercure/storetest"
)

// Env names the variable holding the DSN of the shared test server.
const Env = "MERCURE_TEST_POSTGRES"

// Want is what the PostgreSQL tests skip for want of, for [storetest.ReportSkips].
var Want = storetest.Want{What: "a PostgreSQL server",
	How: "set " + Env + " to a DSN (such as postgres://postgres@127.0.0.1:6432/postgres?sslmode=disable)"}

// DSN returns the DSN of the shared test server, or skips t, counting the
// skip for [storetest.ReportSkips].
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(Env)
	if dsn == "" {
		storetest.Skip(t, Want)
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
	cred *owner
	cmd  *exec.Cmd
}

// Start starts a cluster of its own in a temporary directory (a copy of
// the template, see the package documentation) on a free loopback port;
// it is killed and removed when the test ends. Like every PostgreSQL test
// it skips unless MERCURE_TEST_POSTGRES is set; it also skips with -short,
// and when initdb is not installed (Debian package postgresql). Run as
// root, the server runs as the user postgres, which PostgreSQL requires.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a PostgreSQL server of the test's own costs a second of CPU")
	}
	DSN(t)
	needPrograms(t)
	needSignals(t)
	cred := credential(t)
	tmpl, err := template(cred)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := mkdirOwned(storetest.ScratchDir(), "pgtest-", cred)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{t: t, dir: dir, cred: cred}
	if out, err := s.command("cp", "-a", tmpl, filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		t.Fatalf("copying the template cluster %s: %v\n%s", tmpl, err, out)
	}
	// A port the kernel would not give an outgoing connection: free
	// again for the restart after a kill.
	s.Port = storetest.Port(t)
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// needPrograms skips t, counting the skip for [storetest.ReportSkips], unless
// PostgreSQL's initdb and postgres are installed.
func needPrograms(t testing.TB) {
	t.Helper()
	if Bin("initdb") == "" || Bin("postgres") == "" {
		storetest.Skip(t, storetest.Want{What: "initdb", How: "install PostgreSQL's server programs (Debian package postgresql)"})
	}
}

// credential returns whom the server runs as: nil (the caller) unless
// the caller is root, which PostgreSQL refuses; then the user postgres.
func credential(t testing.TB) *owner {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		storetest.Skip(t, storetest.Want{What: "a user postgres to run the server as (root cannot)", How: "create it, or run the tests as another user"})
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &owner{Uid: uint32(uid), Gid: uint32(gid)}
}

// mkdirOwned makes a temporary directory in root ("": the default) that
// cred (when not nil) owns.
func mkdirOwned(root, pattern string, cred *owner) (string, error) {
	dir, err := os.MkdirTemp(root, pattern)
	if err == nil && cred != nil {
		if err = os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
		}
	}
	return dir, err
}

// initdbArgs are the template's initdb arguments after -D. Small WAL
// segments keep the copy small: a fresh cluster's pg_wal is one segment.
var initdbArgs = []string{"-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C", "--wal-segsize=1"}

// made is the template's data directory once this process has found or
// made it.
var made struct {
	sync.Mutex
	dir string
}

// template returns the data directory of the template cluster for the
// installed server and cred (see [makeTemplate]), once per process.
func template(cred *owner) (string, error) {
	made.Lock()
	defer made.Unlock()
	if made.dir == "" {
		root := storetest.ScratchDir()
		sweep(root, time.Now())
		dir, err := makeTemplate(root, cred)
		if err != nil {
			return "", err
		}
		made.dir = dir
	}
	return made.dir, nil
}

// staleAfter is the age past which a cluster whose server is not
// running is a leftover: no test runs that long (go test's default
// -timeout is 10 minutes).
const staleAfter = time.Hour

// sweep removes the leftover clusters in root: those of test processes
// that ended without their cleanups (killed, or timed out), which would
// hold their memory until the machine restarts. A cluster is left over
// when it is older than staleAfter and holds no running server.
func sweep(root string, now time.Time) {
	dirs, _ := filepath.Glob(filepath.Join(root, "pgtest-*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || now.Sub(fi.ModTime()) < staleAfter || running(filepath.Join(dir, "data")) {
			continue
		}
		os.RemoveAll(dir)
	}
}

// running reports whether the postmaster.pid of the cluster in data
// names a live process.
func running(data string) bool {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return false
	}
	return alive(pid)
}

// makeTemplate returns the data directory of the template cluster in
// root for the installed server and cred, making it if need be. Its name
// (see [templateName]) changes with the server program and the initdb
// arguments: an upgrade or a change here makes a new template. It is made
// aside and renamed into place, so that a directory of that name is
// complete; processes that make it at once each make their own, and the
// first rename wins. A template that no longer matches the inventory
// taken when it was made (a cleaner of the temporary directory removed
// some of its files) is removed and made again: its copies would not
// start.
func makeTemplate(root string, cred *owner) (string, error) {
	key, err := templateName(cred)
	if err != nil {
		return "", err
	}
	final := filepath.Join(root, key)
	data := filepath.Join(final, "data")
	if complete(final) {
		return data, nil
	}
	if _, err := os.Stat(final); err == nil {
		// Damaged: out of the way at once (another process may be looking
		// at it too), then removed.
		gone := filepath.Join(root, fmt.Sprintf("%s.damaged-%d", key, os.Getpid()))
		if err := os.Rename(final, gone); err == nil {
			os.RemoveAll(gone)
		}
	}
	tmp, err := mkdirOwned(root, key+".tmp-", cred)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // left when the rename won
	cmd := exec.Command(Bin("initdb"), append([]string{"-D", filepath.Join(tmp, "data")}, initdbArgs...)...)
	runAs(cmd, cred)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	inv, err := inventory(filepath.Join(tmp, "data"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "inventory"), []byte(inv), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil && !complete(final) {
		return "", err // not another process's template: a real failure
	}
	return data, nil
}

// templateName is the name of the template's directory for the installed
// server and cred: a hash of the server program (path, size, time), the
// initdb arguments and cred.
func templateName(cred *owner) (string, error) {
	postgres := Bin("postgres")
	fi, err := os.Stat(postgres)
	if err != nil {
		return "", err
	}
	h := fnv.New64a()
	fmt.Fprintln(h, postgres, fi.Size(), fi.ModTime().UnixNano(), initdbArgs, cred)
	return fmt.Sprintf("mercure-pgtest-%x", h.Sum64()), nil
}

// complete reports whether the template in dir holds what its inventory
// lists.
func complete(dir string) bool {
	want, err := os.ReadFile(filepath.Join(dir, "inventory"))
	if err != nil {
		return false
	}
	got, err := inventory(filepath.Join(dir, "data"))
	return err == nil && got == string(want)
}

// inventory sums up the tree under dir: how many directories and files,
// and the files' bytes (a fresh cluster has about a thousand files).
func inventory(dir string) (string, error) {
	var dirs, files, size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs++
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files++
		size += fi.Size()
		return nil
	})
	return fmt.Sprintf("%d directories, %d files, %d bytes\n", dirs, files, size), err
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	runAs(cmd, s.cred)
	return cmd
}

// Start starts the killed server again, on the same port and data, and
// waits until it accepts connections. It runs without fsync: a crash of
// the server (see Kill) loses nothing that the kernel was given, and a
// throwaway cluster need not outlive the machine.
func (s *Server) Start() {
	s.t.Helper()
	logf, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = s.command(Bin("postgres"), "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.Port), "-c", "listen_addresses=127.0.0.1", "-k", s.dir,
		"-c", "max_connections=200", "-c", "fsync=off")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	if !storetest.Within(storetest.Deadline, func() bool {
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
	crash(s)
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
