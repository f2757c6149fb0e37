// Package memnet serves HTTP over in-memory connections (net.Pipe), for
// tests that run in a testing/synctest bubble: every goroutine of the
// server and of its client's Transport then blocks durably, and the
// bubble's clock jumps to the next timer at once. A real socket would not
// let the bubble's time advance (its reads wait in the poller, outside
// the bubble's view).
package memnet

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
)

// Server is an HTTP server on in-memory connections.
type Server struct {
	// Client dials the server, whatever the URL's host.
	Client *http.Client
	ln     *listener
	srv    *http.Server
	done   chan struct{}
}

// Serve serves handler until the test ends; in a bubble, call it inside
// the bubble. setup, when not nil, adjusts the server before it starts.
func Serve(t testing.TB, handler http.Handler, setup func(*http.Server)) *Server {
	t.Helper()
	ln := &listener{conns: make(chan net.Conn), closed: make(chan struct{})}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return ln.dial(ctx) },
	}
	s := &Server{Client: &http.Client{Transport: tr}, ln: ln, srv: &http.Server{Handler: handler}, done: make(chan struct{})}
	if setup != nil {
		setup(s.srv)
	}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	t.Cleanup(s.Close)
	return s
}

// Close closes the server and its connections, and the client's idle
// ones; it waits for the server's loop to end.
func (s *Server) Close() {
	s.srv.Close()
	<-s.done
	s.Client.CloseIdleConnections()
}

// listener is a net.Listener of in-memory connections.
type listener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *listener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, syscall.ECONNREFUSED
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *listener) Addr() net.Addr { return addr{} }

type addr struct{}

func (addr) Network() string { return "mem" }
func (addr) String() string  { return "mem" }
