package engine

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mercurekit/mercure/internal/testwait"
)

// detachedServer serves streams of topic "x" on e, detached, over real
// HTTP/1.1 connections.
func detachedServer(t *testing.T, e *Engine) (srv *httptest.Server, owners func() []*owner) {
	t.Helper()
	var mu sync.Mutex
	var os []*owner
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := &owner{}
		mu.Lock()
		os = append(os, o)
		mu.Unlock()
		if err := e.Serve(w, r, Spec{Owner: o, Client: "client", Matchers: []Matcher{exact("x")}}); err != nil {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []*owner {
		mu.Lock()
		defer mu.Unlock()
		return append([]*owner(nil), os...)
	}
}

// openStream opens a stream on srv and returns its connection and a
// reader past the response's headers.
func openStream(t *testing.T, srv *httptest.Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	return conn, br
}

// readData reads the stream's raw bytes until data shows.
func readData(t *testing.T, br *bufio.Reader, data string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if strings.Contains(line, "data: "+data) {
			return
		}
	}
}

// socketDescriptors counts the descriptors of this process that refer to
// the server's end of conn (a TCP connection over IPv4 within this
// process), found by its inode in /proc/net/tcp: parallel tests open and
// close other descriptors meanwhile, never these.
func socketDescriptors(t *testing.T, conn net.Conn) (inode string, count func() int) {
	t.Helper()
	hexAddr := func(a net.Addr) string {
		ta := a.(*net.TCPAddr)
		return fmt.Sprintf("%08X:%04X", binary.LittleEndian.Uint32(ta.IP.To4()), ta.Port)
	}
	local, remote := hexAddr(conn.RemoteAddr()), hexAddr(conn.LocalAddr()) // the server's view
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[2] == remote {
			inode = f[9]
		}
	}
	if inode == "" || inode == "0" {
		t.Fatalf("no socket %s → %s in /proc/net/tcp", local, remote)
	}
	target := "socket:[" + inode + "]"
	return inode, func() int {
		links, _ := filepath.Glob("/proc/self/fd/*")
		n := 0
		for _, l := range links {
			if dest, err := os.Readlink(l); err == nil && dest == target {
				n++
			}
		}
		return n
	}
}

// A detached stream keeps its socket's descriptor and lets go of the
// net.Conn (its runtime poll state and addresses cost more than the
// stream): one descriptor per stream, not the duplicate and the
// original, and none once the stream ended.
func TestDetachedStreamHoldsOneDescriptor(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Detach = true })
	srv, owners := detachedServer(t, e)
	conn, br := openStream(t, srv)
	f := &feeder{e: e}
	f.publish(false, "after detach", "x")
	readData(t, br, "after detach") // written by a writer: detached
	inode, count := socketDescriptors(t, conn)
	if n := count(); n != 1 {
		t.Fatalf("%d descriptors refer to the stream's socket (inode %s), want 1", n, inode)
	}
	conn.Close()
	testwait.For(t, "the stream to end", func() bool { return owners()[0].ended.Load() == 1 })
	if n := count(); n != 0 {
		t.Fatalf("%d descriptors still refer to the ended stream's socket, want 0", n)
	}
}

// When the poller cannot watch a stream's descriptor, the stream gets a
// net.Conn back, read by a goroutine of its own: it still gets its
// events and still notices its client leave, on one descriptor.
func TestDetachedStreamWithoutPollerGetsItsConnBack(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Detach = true })
	e.conns.mu.Lock()
	e.conns.poller = &poller{e: e, dead: true} // refuses every connection
	e.conns.mu.Unlock()
	srv, owners := detachedServer(t, e)
	conn, br := openStream(t, srv)
	f := &feeder{e: e}
	f.publish(false, "first", "x")
	readData(t, br, "first")
	f.publish(false, "second", "x")
	readData(t, br, "second")
	_, count := socketDescriptors(t, conn)
	if n := count(); n != 1 {
		t.Fatalf("%d descriptors refer to the stream's socket, want 1", n)
	}
	conn.Close()
	testwait.For(t, "the stream to end", func() bool { return owners()[0].ended.Load() == 1 })
	if n := count(); n != 0 {
		t.Fatalf("%d descriptors still refer to the ended stream's socket, want 0", n)
	}
}
