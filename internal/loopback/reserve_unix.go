//go:build unix

package loopback

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// reserve takes the lock of port p's file (see the package
// documentation), unless another process holds it; release lets it go.
// Without a directory to keep the files in, ports go unreserved.
func reserve(p int) (release func(), ok bool) {
	dir := filepath.Join(os.TempDir(), "mercure-loopback")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return func() {}, true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return func() {}, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	// Closing the file releases the lock; so does the process's end.
	return func() { f.Close() }, true
}
