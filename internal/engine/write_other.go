//go:build !unix

package engine

import (
	"errors"
	"net"
	"syscall"
)

// socketOf returns nil: writes that never block need a Unix socket, and
// streams write on goroutines of their own instead (see Stream.offload).
func socketOf(net.Conn) syscall.RawConn { return nil }

func writevNow(syscall.RawConn, [][]byte) (int, error) {
	return 0, errors.New("no non-blocking writes on this system")
}

func writevFD(int, [][]byte) (int, error) {
	return 0, errors.New("no non-blocking writes on this system")
}
