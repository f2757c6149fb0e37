package redisstore_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy forwards TCP connections to Redis, and breaks them on demand:
// cut closes them all and refuses new ones until mend (a network
// partition between one instance and Redis); armed drops the reply to
// the next script call and closes that connection (the script ran, but
// its caller never learns it, and retries).
type proxy struct {
	addr, target string
	armed        atomic.Bool
	scripts      atomic.Int64 // script calls seen
	// rate, when not 0, caps the bytes per second from Redis on each
	// connection: a slow link. Set it before the first connection.
	rate int

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
			if p.l != l { // cut while this connection was being set up
				p.mu.Unlock()
				c.Close()
				s.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			var scriptPending atomic.Bool
			p.wg.Add(2)
			go p.pipe(s, c, func(b []byte) bool { // client → server
				if bytes.Contains(bytes.ToLower(b), []byte("evalsha")) {
					p.scripts.Add(1)
					scriptPending.Store(true)
				}
				return true
			})
			start, sent := time.Now(), 0
			go p.pipe(c, s, func(b []byte) bool { // server → client
				if p.rate > 0 {
					if time.Since(start) > time.Second { // no credit saved while idle
						start, sent = time.Now(), 0
					}
					sent += len(b)
					time.Sleep(time.Until(start.Add(time.Duration(sent) * time.Second / time.Duration(p.rate))))
				}
				return !(scriptPending.Swap(false) && p.armed.CompareAndSwap(true, false))
			})
		}
	}()
}

// pipe copies from src to dst while pass lets each chunk through, then
// closes both.
func (p *proxy) pipe(dst, src net.Conn, pass func([]byte) bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !pass(buf[:n]) {
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
