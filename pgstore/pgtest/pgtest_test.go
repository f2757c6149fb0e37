package pgtest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mercurekit/mercure/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.ReportSkips("pgtest", m).Run()) }

// The inventory notices a file or a directory gone, or a file cut short.
func TestComplete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"data/PG_VERSION": "17\n", "data/base/1/1259": "pages", "data/pg_wal/summaries/.keep": ""} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if complete(dir) {
		t.Fatal("complete without an inventory")
	}
	inv, err := inventory(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "inventory"), []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	if !complete(dir) {
		t.Fatalf("incomplete as inventoried (%q)", inv)
	}
	for _, damage := range []func() error{
		func() error { return os.Truncate(filepath.Join(dir, "data/base/1/1259"), 2) },
		func() error { return os.Remove(filepath.Join(dir, "data/pg_wal/summaries/.keep")) },
		func() error { return os.Remove(filepath.Join(dir, "data/pg_wal/summaries")) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		if complete(dir) {
			inv, _ := inventory(filepath.Join(dir, "data"))
			t.Fatalf("complete once damaged (%q)", inv)
		}
	}
}

// A template that a cleaner of the temporary directory damaged is made
// again; a complete one is used as it is.
func TestTemplateMadeAgainWhenDamaged(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: initdb costs a second of CPU")
	}
	needPrograms(t)
	cred := credential(t)
	root, err := mkdirOwned(storetest.ScratchDir(), "pgtest-template-", cred)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	name, err := templateName(cred)
	if err != nil {
		t.Fatal(err)
	}
	// What a cleaner leaves of a template: PG_VERSION (all the previous
	// check looked at) and the inventory, most files gone.
	final := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Join(final, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"data/PG_VERSION": "17\n", "inventory": "22 directories, 997 files, 23345152 bytes\n"} {
		if err := os.WriteFile(filepath.Join(final, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	data, err := makeTemplate(root, cred)
	if err != nil {
		t.Fatal(err)
	}
	if data != filepath.Join(final, "data") || !complete(final) {
		t.Fatalf("made %s again, complete: %v", data, complete(final))
	}
	if _, err := os.Stat(filepath.Join(data, "global", "pg_control")); err != nil {
		t.Fatalf("the template made again is no cluster: %v", err)
	}
	before, err := os.Stat(filepath.Join(final, "inventory"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := makeTemplate(root, cred); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(filepath.Join(final, "inventory"))
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("a complete template was made again (%v)", err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("%s holds %q, want the template alone", root, names)
	}
}

// The clusters of test processes that ended without their cleanups are
// removed; those of running tests stay, whatever their age.
func TestSweep(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	now := time.Now()
	old := now.Add(-2 * staleAfter)
	cluster := func(name string, mtime time.Time, pid string) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if pid != "" {
			if err := os.WriteFile(filepath.Join(dir, "data", "postmaster.pid"), []byte(pid+"\n/some/data\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// A process that has ended: its PID is free (until reused, which
	// takes the whole PID space).
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	gone := []string{
		cluster("pgtest-killed", old, ""),
		cluster("pgtest-dead-server", old, strconv.Itoa(ended.Process.Pid)),
		cluster("pgtest-garbled-pid", old, "not a pid"),
	}
	kept := []string{
		cluster("pgtest-running", old, strconv.Itoa(os.Getpid())),
		cluster("pgtest-young", now.Add(-staleAfter/2), ""),
		cluster("mercure-pgtest-0123", old, ""), // a template
		cluster("other", old, ""),
	}
	sweep(root, now)
	for _, dir := range gone {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s not removed (%v)", dir, err)
		}
	}
	for _, dir := range kept {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s removed: %v", dir, err)
		}
	}
}

// A standby killed while the primary commits lacks that commit once
// promoted, and accepts writes; the multi-host DSN then reaches it.
func TestStandbyLosesWhatItMissed(t *testing.T) {
	t.Parallel()
	p := Start(t)
	sb := p.StartStandby(t, false)
	ctx := context.Background()
	exec := func(dsn, sql string) error {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
	count := func(dsn string) int {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return -1
		}
		defer c.Close(ctx)
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	if err := exec(p.DSN, `CREATE TABLE t (x int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, "the standby to replay the first row", func() bool { return count(sb.DSN) == 1 })
	sb.Stop()
	if err := exec(p.DSN, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	sb.Start()
	sb.Promote()
	if n := count(MultiHostDSN(p, sb)); n != 1 {
		t.Fatalf("the promoted standby holds %d rows, want 1", n)
	}
	if err := exec(MultiHostDSN(p, sb), `INSERT INTO t VALUES (3)`); err != nil {
		t.Fatalf("writing to the promoted standby: %v", err)
	}
}

// With a synchronous standby, a commit waits for it: while it is down,
// the committing session waits (SyncRep), and commits once it is back.
// The standby, promoted, waits for no standby of its own.
func TestSynchronousStandby(t *testing.T) {
	t.Parallel()
	p := Start(t)
	sb := p.StartStandby(t, true)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE TABLE t (x int)`); err != nil {
		t.Fatal(err)
	}
	sb.Kill()
	done := make(chan error, 1)
	go func() {
		c, err := pgx.Connect(ctx, p.DSN)
		if err == nil {
			_, err = c.Exec(ctx, `INSERT INTO t VALUES (1)`)
			c.Close(ctx)
		}
		done <- err
	}()
	storetest.WaitFor(t, "a commit to wait for the standby", func() bool {
		var n int
		return c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n) == nil && n == 1
	})
	sb.Start()
	if err := <-done; err != nil {
		t.Fatalf("the commit, once the standby is back: %v", err)
	}
	p.Kill()
	sb.Promote()
	c2, err := pgx.Connect(ctx, sb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	var names string
	if err := c2.QueryRow(ctx, `SHOW synchronous_standby_names`).Scan(&names); err != nil || names != "" {
		t.Fatalf("the promoted standby's synchronous_standby_names: %q (%v), want none", names, err)
	}
	if _, err := c2.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
}

func TestMultiHostDSN(t *testing.T) {
	t.Parallel()
	got := MultiHostDSN(&Server{Port: 5001}, &Server{Port: 5002})
	want := "postgres://postgres@127.0.0.1:5001,127.0.0.1:5002/postgres?sslmode=disable&target_session_attrs=read-write"
	if got != want {
		t.Fatalf("MultiHostDSN: %s, want %s", got, want)
	}
}
