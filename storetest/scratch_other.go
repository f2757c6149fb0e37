//go:build !linux

package storetest

// freeBytes reports no memory file system outside Linux: scratch goes to
// the temporary directory.
func freeBytes(string) (uint64, bool) { return 0, false }

// alive reports every process as running outside Linux: scratch is not
// in memory there, and the temporary directory is the system's to clean.
func alive(int) bool { return true }
