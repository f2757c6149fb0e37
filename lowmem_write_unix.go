//go:build unix

package mercure

import (
	"errors"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// socketOf returns the socket of c, for writes that never block, when c
// is a plain socket: not TLS, and not a wrapper, whose Write may do more
// than write. It returns nil otherwise.
func socketOf(c net.Conn) syscall.RawConn {
	var sc syscall.Conn
	switch c := c.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// writeNow writes as much of b to rc as the socket takes without
// blocking, and returns how much that was. It fails once the connection's
// write deadline has passed (an abort) or the connection is closed.
func writeNow(rc syscall.RawConn, b []byte) (int, error) {
	written := 0
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for written < len(b) {
			n, err := unix.Write(int(fd), b[written:])
			if n > 0 {
				written += n
				continue
			}
			if err == unix.EINTR {
				continue
			}
			if err == nil {
				err = io.ErrShortWrite
			}
			if err != unix.EAGAIN {
				werr = err
			}
			break // full: the rest waits for room
		}
		return true // done: never wait for the socket
	})
	return written, errors.Join(err, werr)
}
