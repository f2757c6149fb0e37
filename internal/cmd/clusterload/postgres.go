package main

import (
	"errors"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// postgresServer returns a PostgreSQL server, not started, on a free
// port, its data in dir/data, run as the user postgres when this process
// is root (PostgreSQL refuses root).
func postgresServer(name, dir, data string) *server {
	s := &server{name: name, port: freePort(), dir: dir, data: filepath.Join(dir, data), sys: asPostgres(dir),
		crash: syscall.SIGQUIT, settle: 500 * time.Millisecond}
	s.argv = []string{pgBin("postgres"), "-D", s.data, "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-k", dir, "-c", "max_connections=200"}
	return s
}

// postgresURL returns the hubs' -store for servers: with several, pgx
// tries each in turn and keeps the one that accepts writes.
func postgresURL(servers ...*server) string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr()
	}
	u := "postgres://postgres@" + strings.Join(addrs, ",") + "/postgres"
	if len(servers) > 1 {
		u += "?target_session_attrs=read-write"
	}
	return u
}

// initdb makes the server's data directory.
func (s *server) initdb() {
	s.run(pgBin("initdb"), "-D", s.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
}

// run runs a program as the server's user, and fails the run if it
// fails; it returns its output.
func (s *server) run(name string, args ...string) string {
	cmd := s.command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		fatalf("%s: %v\n%s", filepath.Base(name), err, out)
	}
	return string(out)
}

// query runs one SQL statement on the server with psql, and returns its
// output: the rows, unaligned, without headers.
func (s *server) query(sql string) (string, error) {
	out, err := s.command(pgBin("psql"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres",
		"-d", "postgres", "-AtXq", "-c", sql).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// startStandby starts a primary and a standby that streams from it,
// made with pg_basebackup -R. With durable, the primary's commits wait
// for the standby (synchronous_standby_names, set after the copy: the
// promoted standby then waits for no standby of its own).
func startStandby(dir string, durable bool) *storeSet {
	primary := postgresServer("primary", dir, "primary")
	primary.initdb()
	primary.start()
	standby := postgresServer("standby", dir, "standby")
	primary.run(pgBin("pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", standby.data, "-R", "-X", "stream", "-c", "fast", "--no-sync")
	if durable {
		for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"} {
			if out, err := primary.query(q); err != nil {
				fatalf("%s: %v\n%s", q, err, out)
			}
		}
	}
	standby.start()
	streaming := func() bool { return streams(primary, durable) }
	waitAll("the standby to stream", 30*time.Second, streaming)
	return &storeSet{kind: kindPostgresStandby, url: postgresURL(primary, standby), all: []*server{primary, standby},
		primary: primary, replica: standby, promote: standby.promote, synced: streaming, lag: primary.holdWAL}
}

// holdWAL stops (SIGSTOP) the primary's walsender, the process that
// streams its WAL to the standby: the primary's commits are then
// acknowledged (asynchronous replication) without reaching the standby,
// or wait for it (synchronous). It returns the release, to call once the
// primary was sent its crash, which kills the walsender (SIGKILL): it
// never sends what it held, and the primary does not wait for it.
//
// Stopping the standby's walreceiver instead would lose nothing: the
// walsender goes on sending, the WAL waits in the walreceiver's socket
// buffer, and once continued it reads and applies it all before it
// finds the link closed (tried: 100 commits made during the stop, all
// 100 on the promoted standby). Killing the walreceiver then does lose
// them, but the standby's postmaster takes the kill of one of its
// processes for a crash, and reinitializes: a second failure, on the
// server that takes over. A stopped walsender holds the WAL on the
// primary, as a partition would, and dies with it.
func (s *server) holdWAL() (release func()) {
	out, err := s.query("SELECT pid FROM pg_stat_replication")
	pid, err2 := strconv.Atoi(out)
	if err != nil || err2 != nil {
		fatalf("the walsender's pid on %s: %q %v", s.name, out, err)
	}
	p, err := os.FindProcess(pid)
	check(err)
	check(stop(p))
	return func() {
		if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			fatalf("killing the walsender of %s: %v", s.name, err)
		}
	}
}

// streams reports whether a standby streams from primary, as a
// synchronous one if sync.
func streams(primary *server, sync bool) bool {
	q := "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
	if sync {
		q += " AND sync_state = 'sync'"
	}
	out, err := primary.query(q)
	return err == nil && out == "1"
}

// promote makes the standby s a primary, as failover tooling would, and
// returns once it accepts writes.
func (s *server) promote() {
	s.run(pgBin("pg_ctl"), "promote", "-D", s.data, "-w", "-t", "30")
	log.Printf("%s promoted", s.name)
}

// pgBin returns the path of a PostgreSQL server program: from PATH, or
// from Debian's /usr/lib/postgresql/*/bin.
func pgBin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(m) == 0 {
		fatalf("%s not found: install PostgreSQL's server programs", name)
	}
	return m[len(m)-1]
}
