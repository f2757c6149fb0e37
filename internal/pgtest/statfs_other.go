//go:build !linux

package pgtest

// freeBytes reports no memory file system outside Linux: clusters go to
// the temporary directory.
func freeBytes(string) (uint64, bool) { return 0, false }
