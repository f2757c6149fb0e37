package storetest

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Filters returns, for one new connection, the functions that see each
// chunk going to the server and to the client; a function that returns
// false drops its chunk and closes the connection. Either may be nil.
type Filters func() (toServer, toClient func([]byte) bool)

// Proxy forwards TCP connections from Addr to its target, and cuts them
// on demand, as a network partition between one instance and the server
// would: the link of an [OutageServer].
type Proxy struct {
	addr, target string
	filters      Filters

	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
	wg    sync.WaitGroup

	armed atomic.Pointer[[]byte] // see LoseReply
	lost  []*atomic.Bool         // LoseReply's flags, the latest last
}

// StartProxy returns a proxy to target, listening on a loopback port (one of
// [Port], that Mend can listen on again), with filters if not
// nil; it is cut and its goroutines waited for when t ends.
func StartProxy(t testing.TB, target string, filters Filters) *Proxy {
	t.Helper()
	p := &Proxy{target: target, filters: filters}
	// A port found free can be taken before the proxy listens on it (by
	// a program that does not reserve its ports as Port does): another
	// one then serves as well, the address being the proxy's to choose.
	for attempt := 1; ; attempt++ {
		p.addr = Addr(t)
		err := p.listen()
		if err == nil {
			break
		}
		if attempt == 5 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { p.Cut(); p.wg.Wait() })
	return p
}

// Addr is the address clients connect to; it stays the same after Mend.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Mend accepts connections again, on the same address. A port briefly
// taken (see StartProxy) is tried again for a while.
func (p *Proxy) Mend(t testing.TB) {
	t.Helper()
	err := p.listen()
	for wait := 10 * time.Millisecond; errors.Is(err, syscall.EADDRINUSE) && wait < 2*time.Second; wait *= 2 {
		time.Sleep(wait)
		err = p.listen()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// listen listens on the proxy's address and forwards what it accepts.
func (p *Proxy) listen() error {
	l, err := net.Listen("tcp", p.Addr())
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.l, p.addr = l, l.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.l != l { // cut while this connection was being set up
				p.mu.Unlock()
				c.Close()
				s.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			var toServer, toClient func([]byte) bool
			if p.filters != nil {
				toServer, toClient = p.filters()
			}
			toServer, toClient = p.losing(toServer, toClient)
			p.wg.Add(2)
			go p.pipe(s, c, toServer)
			go p.pipe(c, s, toClient)
		}
	}()
	return nil
}

// pipe copies from src to dst while pass (if not nil) lets each chunk
// through, then closes both.
func (p *Proxy) pipe(dst, src net.Conn, pass func([]byte) bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if pass != nil && !pass(buf[:n]) {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut closes every connection and stops accepting new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// LoseReply makes the proxy lose the server's reply to the next chunk
// sent to it that holds marker: it closes that connection instead of
// passing the reply on, as a network failing after the request went
// through would. lost reports whether it has.
func (p *Proxy) LoseReply(marker string) (lost func() bool) {
	m := []byte(marker)
	var done atomic.Bool
	p.armed.Store(&m)
	p.mu.Lock()
	p.lost = append(p.lost, &done)
	p.mu.Unlock()
	return done.Load
}

// losing wraps a connection's filters with LoseReply's.
func (p *Proxy) losing(toServer, toClient func([]byte) bool) (func([]byte) bool, func([]byte) bool) {
	var pending atomic.Pointer[atomic.Bool] // the reply to lose, and its flag
	server := func(b []byte) bool {
		if m := p.armed.Load(); m != nil && bytes.Contains(b, *m) && p.armed.CompareAndSwap(m, nil) {
			p.mu.Lock()
			pending.Store(p.lost[len(p.lost)-1])
			p.mu.Unlock()
		}
		return toServer == nil || toServer(b)
	}
	client := func(b []byte) bool {
		if done := pending.Swap(nil); done != nil {
			done.Store(true)
			return false
		}
		return toClient == nil || toClient(b)
	}
	return server, client
}
