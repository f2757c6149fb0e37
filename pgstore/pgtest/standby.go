package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mercurekit/mercure/storetest"
)

// A failover, as a test stages it: the primary s and a standby of it
// (StartStandby), a store on the DSN of both (MultiHostDSN), s killed
// (Kill) and the standby promoted (Promote). A killed server stays down:
// nothing here starts it again, so that the promoted standby is the only
// server that accepts writes, as after a real failover.
//
// A standby with asynchronous replication lacks what s committed last
// only by chance. A test makes it lack some for sure: it kills the
// standby (Kill, or Stop), commits on s, kills s, starts the standby
// again (Start: it is still a standby, and replays what it had) and
// promotes it.

// StartStandby starts a streaming standby of s in a directory of its
// own, on a free loopback port, with the flags of [Start]: a base backup
// of s (pg_basebackup, run as s's owner) that follows s as application
// "standby_<port>". It is killed and removed when t ends. With sync,
// s waits at every commit for it alone (s's synchronous_standby_names
// names it); without, s does not wait. StartStandby returns once s
// streams to it, and with sync once s counts it as synchronous. It skips
// t when pg_basebackup is not installed.
func (s *Server) StartStandby(t testing.TB, sync bool) *Server {
	t.Helper()
	if Bin("pg_basebackup") == "" {
		storetest.Skip(t, storetest.Want{What: "pg_basebackup", How: "install PostgreSQL's server programs (Debian package postgresql)"})
	}
	dir, err := mkdirOwned(storetest.ScratchDir(), "pgtest-", s.cred)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sb := &Server{t: t, dir: dir, cred: s.cred, Port: storetest.Port(t)}
	sb.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", sb.Port)
	name := fmt.Sprintf("standby_%d", sb.Port)
	data := filepath.Join(dir, "data")
	// -R writes primary_conninfo (with the application name, which
	// synchronous_standby_names matches) and standby.signal; a fast
	// checkpoint starts the backup at once.
	from := s.DSN + "&application_name=" + name
	if out, err := sb.command(Bin("pg_basebackup"), "-D", data, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-d", from).CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup of the server on port %d: %v\n%s", s.Port, err, out)
	}
	// The copy has s's ALTER SYSTEM settings: promoted, it would wait
	// for the standbys s waits for.
	if err := forget(filepath.Join(data, "postgresql.auto.conf"), "synchronous_standby_names"); err != nil {
		t.Fatal(err)
	}
	sb.Start()
	t.Cleanup(sb.Kill)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if sync {
		// ALTER SYSTEM takes no parameter; the name is one of ours.
		for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = '"` + name + `"'`, `SELECT pg_reload_conf()`} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	storetest.WaitFor(t, "the primary to stream to "+name, func() bool {
		// A new session each time: one forked since the reload has
		// the new setting, which pg_stat_replication's sync_state
		// follows.
		c, err := pgx.Connect(ctx, s.DSN)
		if err != nil {
			return false
		}
		defer c.Close(ctx)
		var ok bool
		err = c.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_replication
			WHERE application_name = $1 AND state = 'streaming' AND (NOT $2 OR sync_state = 'sync')`, name, sync).Scan(&ok)
		return err == nil && ok
	})
	if sync {
		// Backends wait for a standby once the checkpointer, which
		// handles the reload before a checkpoint, says one is named.
		if _, err := c.Exec(ctx, `CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
	}
	return sb
}

// forget removes the lines of a configuration file that set name.
func forget(path, name string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var kept []string
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(strings.TrimSpace(line), name) {
			kept = append(kept, line)
		}
	}
	// Written in place: the file keeps its owner.
	return os.WriteFile(path, []byte(strings.Join(kept, "")), 0o600)
}

// Promote makes the standby s a primary (pg_promote) and returns once
// it accepts writes.
func (s *Server) Promote() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), storetest.Deadline)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close(ctx)
	var ok bool
	if err := c.QueryRow(ctx, `SELECT pg_promote(true, $1)`, int(storetest.Deadline/time.Second)).Scan(&ok); err != nil || !ok {
		s.t.Fatalf("promoting the standby on port %d: %v (promoted: %v)", s.Port, err, ok)
	}
	storetest.WaitFor(s.t, "the promoted server to accept writes", func() bool {
		c, err := pgx.Connect(ctx, s.DSN+"&target_session_attrs=read-write")
		if err != nil {
			return false
		}
		c.Close(ctx)
		return true
	})
}

// MultiHostDSN returns a DSN naming servers in order, which connects to
// the first of them that accepts writes (target_session_attrs=read-write),
// as an application's DSN for a primary and its standbys does.
func MultiHostDSN(servers ...*Server) string {
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", s.Port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}
