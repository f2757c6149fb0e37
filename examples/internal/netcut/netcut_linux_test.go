package netcut

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mercurekit/mercure/storetest"
)

// dial opens a connection to l and returns its client side and the
// server's net.Conn.
func dial(t *testing.T, l *Listener) (client, server net.Conn) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	return client, server
}

func listen(t *testing.T) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &Listener{Listener: ln}
}

// Cut ends a connection whose server still holds its net.Conn, and one
// whose server kept a duplicate of the socket's descriptor and closed
// the net.Conn (what a hub's detached stream does): the client reads the
// bytes End wrote, then the end of the stream.
func TestCutWhoeverHoldsTheSocket(t *testing.T) {
	t.Parallel()
	l := listen(t)
	plain, _ := dial(t, l)
	detached, server := dial(t, l)
	var dup int
	rc, err := server.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dup)
	server.Close() // the duplicate keeps the socket open

	l.mu.Lock()
	conns := append([]net.Conn(nil), l.conns...)
	l.mu.Unlock()
	if err := End(conns[1], []byte("last")); err != nil {
		t.Fatal(err)
	}
	l.Cut()
	for _, c := range []net.Conn{plain, detached} { // a socket left open fails the test, not its run
		c.SetReadDeadline(time.Now().Add(storetest.Deadline))
	}
	if b, err := io.ReadAll(detached); err != nil || string(b) != "last" {
		t.Errorf("the detached connection read %q, %v; want the last bytes, then its end", b, err)
	}
	if b, err := io.ReadAll(plain); err != nil || len(b) != 0 {
		t.Errorf("the plain connection read %q, %v; want its end", b, err)
	}
}
