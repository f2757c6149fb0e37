package client_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
)

// memServer serves handler over in-memory connections (net.Pipe), so that
// a test in a testing/synctest bubble owns the clock: every goroutine of
// the server and of its client's Transport blocks durably, and the fake
// time jumps to the next deadline at once. A real socket would not let
// the bubble's time advance.
type memServer struct {
	Client *http.Client // dials the server, whatever the URL's host
	ln     *memListener
	srv    *http.Server
	done   chan struct{}
}

// startMemServer serves handler until the test ends; call it inside the
// bubble.
func startMemServer(t *testing.T, handler http.Handler) *memServer {
	t.Helper()
	ln := &memListener{conns: make(chan net.Conn), closed: make(chan struct{})}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return ln.dial(ctx) },
	}
	s := &memServer{Client: &http.Client{Transport: tr}, ln: ln, srv: &http.Server{Handler: handler}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		s.srv.Close()
		<-s.done
		tr.CloseIdleConnections()
	})
	return s
}

// memListener is a net.Listener of in-memory connections.
type memListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *memListener) dial(ctx context.Context) (net.Conn, error) {
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

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }
