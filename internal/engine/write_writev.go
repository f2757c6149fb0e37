//go:build darwin || linux || openbsd || (illumos && amd64)

// The systems where golang.org/x/sys/unix has Writev: elsewhere, see
// write_other.go.

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

// writevNow writes as much of iov to rc as the socket takes without
// blocking, with one writev per 1024 slices, and returns how much that
// was. It fails once the connection's write deadline has passed (an
// abort) or the connection is closed.
func writevNow(rc syscall.RawConn, iov [][]byte) (int, error) {
	w := nbWrites.Get().(*nbWrite)
	w.iov, w.n, w.err = iov, 0, nil
	err := rc.Write(w.fn)
	n, werr := w.n, w.err
	w.iov, w.err = nil, nil
	nbWrites.Put(w)
	if err == nil {
		err = werr
	}
	return n, err
}

// writevFD is writevNow on a descriptor the engine owns (see
// Stream.ownSocket), non-blocking like every socket of the net package.
func writevFD(fd int, iov [][]byte) (int, error) {
	w := nbWrite{iov: iov}
	w.write(uintptr(fd))
	return w.n, w.err
}

// iovMax is the most slices one writev takes (IOV_MAX on Linux).
const iovMax = 1024

// nbWrite is one writevNow: its callback, bound once, saves allocating
// a closure per write.
type nbWrite struct {
	iov [][]byte
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
	iov := w.iov
	for len(iov) > 0 {
		batch := iov[:min(len(iov), iovMax)]
		var n int
		var err error
		if len(batch) == 1 {
			n, err = unix.Write(int(fd), batch[0])
		} else {
			n, err = unix.Writev(int(fd), batch)
		}
		if n > 0 {
			w.n += n
			size := 0
			for _, b := range batch {
				size += len(b)
			}
			if n < size {
				break // full: the rest waits for room
			}
			iov = iov[len(batch):]
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
