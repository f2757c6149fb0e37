package storetest

import (
	"errors"
	"syscall"
)

// freeBytes returns the bytes free on the file system of dir, and whether
// dir is a directory that this process can write in.
func freeBytes(dir string) (uint64, bool) {
	if syscall.Access(dir, 2 /* W_OK */) != nil {
		return 0, false
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}

// alive reports whether a process pid runs (or may: one that this
// process may not signal counts as running).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
