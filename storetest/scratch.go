package storetest

// Scratch is where tests keep files that must not outlive them: memory
// (/dev/shm) where it has room, else the temporary directory. On a disk,
// such files cost their creation and their fsyncs: the Bolt store's tests
// spent half their CPU time in them on ext4, and copying PostgreSQL
// clusters into a directory where the tests had just removed the previous
// copies took a quarter of the PostgreSQL store's (the allocator scans
// the inodes recently freed).

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// scratchMemoryDir is the memory file system that scratch goes to, where there
// is room.
const scratchMemoryDir = "/dev/shm"

// ScratchRoom is the room that Dir wants free on scratchMemoryDir: many PostgreSQL
// clusters at once (~30 MB each), and PostgreSQL's own dynamic shared
// memory, which takes its segments from the same place. A container's
// default /dev/shm (64 MiB) is too small.
const ScratchRoom = 2 << 30

// ScratchDir returns scratchMemoryDir when it is a directory with ScratchRoom free, else the
// temporary directory.
func ScratchDir() string {
	if free, ok := freeBytes(scratchMemoryDir); ok && free >= ScratchRoom {
		return scratchMemoryDir
	}
	return os.TempDir()
}

// scratchPrefix begins the names of TempDir's directories, followed by the pid
// of the process that made them.
const scratchPrefix = "mercure-scratch-"

var scratchSweep sync.Once

// TempDir is t.TempDir in ScratchDir: a new directory, removed with its
// contents when t and its subtests end. A process killed before its
// cleanups would leave its directories in memory until a reboot: the
// first call of a process removes those of processes that no longer run.
func TempDir(t testing.TB) string {
	t.Helper()
	root := ScratchDir()
	scratchSweep.Do(func() { sweepScratch(root) })
	dir, err := os.MkdirTemp(root, scratchPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("TempDir: removing %s: %v", dir, err)
		}
	})
	return dir
}

// sweep removes the directories of TempDir in root whose process no
// longer runs.
func sweepScratch(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, scratchPrefix+"*"))
	for _, dir := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), scratchPrefix), "-")
		if n, err := strconv.Atoi(pid); ok && err == nil && n > 0 && !alive(n) {
			os.RemoveAll(dir)
		}
	}
}
