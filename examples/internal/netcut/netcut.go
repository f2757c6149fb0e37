// Package netcut is a listener whose connections a test can cut, as a
// network failure would, even once the server let go of the net.Conn it
// accepted: on Linux, a hub's detached streams keep a duplicate of their
// socket's descriptor and close the net.Conn, so that closing it no
// longer ends them. Cut finds the socket by its addresses and shuts it
// down, whichever descriptor holds it.
package netcut

import (
	"net"
	"sync"
)

// Listener keeps the connections it accepted, for Cut.
type Listener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

// Accept accepts a connection and keeps it.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// Cut ends every connection accepted so far: each net.Conn is closed and
// its socket shut down, so that the client sees its connection end and
// the server sees its client leave.
func (l *Listener) Cut() {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		End(c, nil)
	}
}

// End ends the server's side of c after writing last on it (nothing if
// last is empty): the bytes go out on the socket whoever holds it now, then
// the socket is shut down and c closed.
func End(c net.Conn, last []byte) error {
	err := shutdown(c, last)
	c.Close()
	return err
}
