// Package alone runs a test in a process of its own: a child process of
// the test binary that runs that test and nothing else.
//
// It is for tests that assert on the whole process (its goroutines, its
// live heap): beside the parallel tests of their package, the figures
// would count the other tests' goroutines and allocations too, so such
// tests used to run alone in the serial phase, which every parallel test
// of the package waits for. In a process of their own they run in
// parallel with the rest, their figures still their own.
package alone

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/skips"
)

// env names the test that a child process runs; its presence is how the
// child knows it is one.
const env = "MERCURE_TEST_ALONE"

// ExecEnv names the variable that holds the program that runs the test
// binary where the system cannot, as go test -exec does: an emulator,
// such as qemu-arm for GOARCH=arm. The child is started through it too:
// qemu-user runs one binary, and its children are the system's to run.
const ExecEnv = "MERCURE_TEST_EXEC"

// InProcess runs the calling test in a child process of the test binary
// and reports false once it has run there, with the test passed, failed
// or skipped as it was in the child: the caller then returns. In that
// child, InProcess reports true and the caller goes on with the test.
//
// Call it first in the test, in place of t.Parallel, which it calls once
// the child has started: the child runs from the moment the parent test
// reaches InProcess, even in the package's serial phase, without waiting
// for a slot among the parallel tests, and costs them nothing but CPU.
// A test that waits a long time thus starts first. The child runs the
// test function from its beginning, after the package's TestMain, with
// the flags -short, -v and -timeout (what is left of it) of the parent;
// it writes no coverage profile.
func InProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(env) == t.Name() {
		return true
	}
	args := []string{"-test.run=" + pattern(t.Name()), "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).String())
	}
	cmd := Command(t.Context(), args...)
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.ENOEXEC) {
			// The system cannot run this binary: an emulator does.
			skips.Skip(t, skips.Want{What: "a way to run the test binary again (" + err.Error() + ")",
				How: "set " + ExecEnv + " to the program that runs it, such as qemu-arm"})
		}
		t.Fatalf("starting a process of its own: %v", err)
	}
	t.Parallel()
	err := cmd.Wait()
	switch b := out.Bytes(); {
	case err != nil:
		t.Fatalf("in a process of its own: %v\n%s", err, b)
	case bytes.Contains(b, []byte("--- SKIP: "+t.Name()+" ")):
		t.Skipf("skipped in a process of its own:\n%s", b)
	case !bytes.Contains(b, []byte("--- PASS: "+t.Name()+" ")):
		t.Fatalf("not run in a process of its own:\n%s", b)
	case testing.Verbose():
		t.Logf("in a process of its own:\n%s", b)
	}
	return false
}

// Command returns a command that runs the test binary again with args,
// through the program that ExecEnv names, if any.
func Command(ctx context.Context, args ...string) *exec.Cmd {
	args = append([]string{os.Args[0]}, args...)
	if emu := strings.Fields(os.Getenv(ExecEnv)); len(emu) > 0 {
		args = append(emu, args...)
	}
	return exec.CommandContext(ctx, args[0], args[1:]...)
}

// pattern is the -test.run pattern that selects exactly the test (or
// subtest) called name: one anchored, quoted element per level.
func pattern(name string) string {
	levels := strings.Split(name, "/")
	for i, l := range levels {
		levels[i] = "^" + regexp.QuoteMeta(l) + "$"
	}
	return strings.Join(levels, "/")
}
