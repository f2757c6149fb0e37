// Package loopback picks loopback ports for test servers that listen on
// a port picked beforehand: a program told its port (PostgreSQL, Redis,
// Prometheus), a server killed and restarted, a proxy cut and mended, a
// hub restarted.
//
// A port that the kernel handed out for port 0 is from its ephemeral
// range, the range it also takes the local ports of outgoing connections
// from: once released, any connection of the machine (a test suite makes
// thousands) may take it before the server listens, which then fails
// with "address already in use". The ports of this package are below that
// range, where no outgoing connection is given a port.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
)

// lowest is the lowest port Port picks.
const lowest = 10000

// Port returns a free loopback port (127.0.0.1) below the kernel's
// ephemeral range, for a server to listen on later, and again after a
// restart; it fails t when it finds none.
func Port(t testing.TB) int {
	t.Helper()
	p, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Free is [Port] for programs: it returns the error.
func Free() (int, error) { return port(ephemeralStart()) }

// Addr returns "127.0.0.1:" and a port from [Port].
func Addr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", Port(t))
}

// port returns a free port in [lowest, below), tried at random: processes
// that pick at once rarely pick the same.
func port(below int) (int, error) {
	if below <= lowest {
		return 0, fmt.Errorf("loopback: no ports below the ephemeral range (it starts at %d)", below)
	}
	var err error
	for range 100 {
		p := lowest + rand.IntN(below-lowest)
		var l net.Listener
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("loopback: no free port in [%d, %d): %v", lowest, below, err)
}

// ephemeralStart returns the first port of the kernel's ephemeral range:
// Linux says it in /proc; elsewhere, 32768, below Linux's default range
// and the IANA range of macOS and BSDs (49152-65535).
func ephemeralStart() int {
	var lo, hi int
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && lo > 0 {
			return lo
		}
	}
	return 32768
}
