package pgstore_test

import (
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections to PostgreSQL and breaks them on demand:
// cut closes them all and refuses new ones until mend, as a network
// partition between one instance and the database would.
type proxy struct {
	addr, target string

	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{addr: "127.0.0.1:0", target: target}
	p.mend(t)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

// mend accepts connections again, on the same address.
func (p *proxy) mend(t *testing.T) {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
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
			if p.l != l {
				p.mu.Unlock()
				c.Close()
				s.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(s, c)
			go p.pipe(c, s)
		}
	}()
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes every connection and stops accepting new ones.
func (p *proxy) cut() {
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
