package pgtest

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

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
