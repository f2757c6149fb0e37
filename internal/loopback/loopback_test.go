package loopback

import (
	"net"
	"runtime"
	"strconv"
	"testing"
)

// The port is free, on loopback, and below the ephemeral range.
func TestPort(t *testing.T) {
	t.Parallel()
	below := ephemeralStart()
	for range 20 {
		p := Port(t)
		if p < lowest || p >= below {
			t.Fatalf("port %d, want one in [%d, %d)", p, lowest, below)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// An outgoing connection's local port is from the ephemeral range, never
// one Port picks.
func TestEphemeralStart(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 20 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		local := c.LocalAddr().(*net.TCPAddr).Port
		c.Close()
		if local < ephemeralStart() {
			t.Fatalf("an outgoing connection got port %d, below the ephemeral range's start %d", local, ephemeralStart())
		}
	}
}

// A range that leaves nothing below it is an error, not a loop.
func TestNoRoom(t *testing.T) {
	t.Parallel()
	if p, _, err := port(lowest); err == nil {
		t.Fatalf("port %d from an empty range", p)
	}
}

// A port given out is reserved until its test ends: reserving it again
// fails, as it does in another process (a lock on a file is held by an
// open file, not by a process); once released, it can be reserved.
func TestReserved(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("only Unix systems reserve ports")
	}
	var p int
	t.Run("given", func(t *testing.T) {
		p = Port(t)
		if _, ok := reserve(p); ok {
			t.Fatalf("port %d reserved twice", p)
		}
	})
	release, ok := reserve(p)
	if !ok {
		t.Fatalf("port %d still reserved once its test ended", p)
	}
	release()
}
