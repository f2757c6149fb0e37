//go:build !(darwin || linux || openbsd || (illumos && amd64))

package engine

import (
	"errors"
	"net"
	"syscall"
)

// socketOf returns nil: writes that never block need a Unix socket and
// golang.org/x/sys/unix's Writev (of the Unix systems, FreeBSD, NetBSD,
// DragonFly, Solaris and AIX lack it), and streams write on goroutines of
// their own instead (see Stream.offload), as they do for TLS. These
// systems have no poller either: a goroutine reads each detached stream
// already (see Engine.read), and another runs only while a write is under way.
func socketOf(net.Conn) syscall.RawConn { return nil }

func writevNow(syscall.RawConn, [][]byte) (int, error) {
	return 0, errors.New("no non-blocking writes on this system")
}

func writevFD(int, [][]byte) (int, error) {
	return 0, errors.New("no non-blocking writes on this system")
}
