//go:build unix

package engine

import (
	"io"
	"net"
	"sync"
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
	w := nbWrites.Get().(*nbWrite)
	w.b, w.n, w.err = b, 0, nil
	err := rc.Write(w.fn)
	n, werr := w.n, w.err
	w.b, w.err = nil, nil
	nbWrites.Put(w)
	if err == nil {
		err = werr
	}
	return n, err
}

// nbWrite is one writeNow: its callback, bound once, saves allocating
// a closure per write.
type nbWrite struct {
	b   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

var nbWrites = sync.Pool{New: func() any {
	w := new(nbWrite)
	w.fn = w.write
	return w
}}

// write is the callback of RawConn.Write: it writes until the socket is
// full, then reports done, so that the caller never waits for the socket.
func (w *nbWrite) write(fd uintptr) bool {
	for w.n < len(w.b) {
		n, err := unix.Write(int(fd), w.b[w.n:])
		if n > 0 {
			w.n += n
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err == nil {
			err = io.ErrShortWrite
		}
		if err != unix.EAGAIN {
			w.err = err
		}
		break // full: the rest waits for room
	}
	return true
}
