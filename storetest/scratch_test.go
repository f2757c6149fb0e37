package storetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// Scratch goes to memory where it has room, to the temporary directory
// elsewhere (a container's 64 MiB /dev/shm, another system).
func TestDir(t *testing.T) {
	t.Parallel()
	if _, ok := freeBytes(filepath.Join(t.TempDir(), "absent")); ok {
		t.Fatal("room found in a directory that does not exist")
	}
	if free, ok := freeBytes(t.TempDir()); !ok || free == 0 {
		t.Fatalf("the temporary directory's file system: %d bytes free, %v", free, ok)
	}
	want := os.TempDir()
	if free, ok := freeBytes(scratchMemoryDir); ok && free >= ScratchRoom {
		want = scratchMemoryDir
	}
	if got := ScratchDir(); got != want {
		t.Fatalf("ScratchDir() = %s, want %s", got, want)
	}
	if runtime.GOOS == "linux" && want != scratchMemoryDir {
		free, _ := freeBytes(scratchMemoryDir)
		t.Logf("%s has %d MiB free, less than %d MiB: scratch goes to %s", scratchMemoryDir, free>>20, ScratchRoom>>20, want)
	}
}

// A TempDir is new, in Dir, and gone with its contents once its test
// ends.
func TestTempDir(t *testing.T) {
	t.Parallel()
	var dir string
	t.Run("user", func(t *testing.T) {
		dir = TempDir(t)
		if filepath.Dir(dir) != filepath.Clean(ScratchDir()) {
			t.Errorf("TempDir %s, not in %s", dir, ScratchDir())
		}
		if other := TempDir(t); other == dir {
			t.Errorf("TempDir twice: %s both times", dir)
		}
		if err := os.WriteFile(filepath.Join(dir, "hub.db"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s after its test: %v, want it removed", dir, err)
	}
}

// The directories of processes that ended without their cleanups are
// removed; those of running processes, and others, stay.
func TestSweep(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the sweep is for memory, on Linux")
	}
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Skip("no true program to take a pid that ends")
	}
	root := t.TempDir()
	dir := func(name string) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dead := dir(scratchPrefix + strconv.Itoa(ended.Process.Pid) + "-123")
	keep := []string{
		dir(scratchPrefix + strconv.Itoa(os.Getpid()) + "-456"),
		dir(scratchPrefix + "1-789"), // init: runs
		dir(scratchPrefix + "garbled"),
		dir("mercure-pgtest-0123"),
	}
	sweepScratch(root)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s of an ended process: %v, want it removed", dead, err)
	}
	for _, d := range keep {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v, want it kept", d, err)
		}
	}
}
