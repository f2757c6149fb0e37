package alone_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mercurekit/mercure/internal/alone"
	"github.com/mercurekit/mercure/internal/testwait"
)

// The fixtures run only when TestInProcess runs this binary with
// fixtures set (to a directory they share): each goes to a process of
// its own and passes, fails or skips there.
const fixtures = "ALONE_TEST_FIXTURES"

func TestFixturePasses(t *testing.T) {
	if os.Getenv(fixtures) == "" {
		t.Skip("a fixture of TestInProcess")
	}
	if !alone.InProcess(t) {
		t.Logf("parent pid %d", os.Getpid())
		return
	}
	t.Logf("child pid %d", os.Getpid())
}

func TestFixtureFails(t *testing.T) {
	if os.Getenv(fixtures) == "" {
		t.Skip("a fixture of TestInProcess")
	}
	t.Run("sub test", func(t *testing.T) {
		if !alone.InProcess(t) {
			return
		}
		t.Fatal("failed in the child")
	})
}

func TestFixtureSkips(t *testing.T) {
	if os.Getenv(fixtures) == "" {
		t.Skip("a fixture of TestInProcess")
	}
	if !alone.InProcess(t) {
		return
	}
	t.Skip("skipped in the child")
}

// The child of a test run alone starts before the package's serial
// phase goes on: the serial fixture after this one waits for it.
func TestFixtureStartsAtOnce(t *testing.T) {
	dir := os.Getenv(fixtures)
	if dir == "" {
		t.Skip("a fixture of TestInProcess")
	}
	if !alone.InProcess(t) {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "started"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFixtureSerialSeesTheChild(t *testing.T) {
	dir := os.Getenv(fixtures)
	if dir == "" {
		t.Skip("a fixture of TestInProcess")
	}
	started := func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	}
	if !testwait.Within(testwait.Deadline, started) {
		t.Fatal("the child of the test before this one did not start during the serial phase")
	}
}

// A test run alone runs in another process, which only it runs, and its
// outcome there (pass, failure, skip) is its outcome.
func TestInProcess(t *testing.T) {
	t.Parallel()
	cmd := alone.Command(t.Context(), "-test.run=^TestFixture", "-test.v")
	cmd.Env = append(os.Environ(), fixtures+"="+t.TempDir())
	b, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.ENOEXEC) {
		t.Skipf("the system cannot run the test binary (%v): an emulator does; set %s to it", err, alone.ExecEnv)
	}
	out := string(b)
	if err == nil {
		t.Fatalf("a failing fixture, yet the binary passed:\n%s", out)
	}
	for _, want := range []string{
		"--- PASS: TestFixturePasses ",
		"--- FAIL: TestFixtureFails/sub_test ",
		"failed in the child",
		"--- SKIP: TestFixtureSkips ",
		"skipped in the child",
		"--- PASS: TestFixtureStartsAtOnce ",
		"--- PASS: TestFixtureSerialSeesTheChild ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
	pid := func(who string) int {
		m := regexp.MustCompile(who + ` pid (\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s pid in the output:\n%s", who, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if parent, child := pid("parent"), pid("child"); parent == child || parent != cmd.Process.Pid {
		t.Errorf("parent pid %d (the binary's %d), child pid %d: want the child in a process of its own", parent, cmd.Process.Pid, child)
	}
	// The child ran its test and no other: the passing fixture's child
	// ran no fixture that fails.
	if n := strings.Count(out, "failed in the child"); n != 1 {
		t.Errorf("%d failures in the output, want the failing fixture's only:\n%s", n, out)
	}
}
