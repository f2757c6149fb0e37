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
//
// The test processes of a run (go test runs packages side by side) pick
// from the same range, and a test that kills its server and starts it
// again leaves its port free meanwhile: each port this package gives out
// is reserved, on Unix systems, by a lock on a file of its own in the
// temporary directory (mercure-loopback/PORT), which the other processes
// skip, until the test ends (Port) or the process does (Free).
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
	p, release, err := port(ephemeralStart())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return p
}

// Free is [Port] for programs: it returns the error, and the port stays
// reserved until the process ends.
func Free() (int, error) {
	p, _, err := port(ephemeralStart())
	return p, err
}

// Addr returns "127.0.0.1:" and a port from [Port].
func Addr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", Port(t))
}

// port returns a free port in [lowest, below), tried at random, that no
// other process has reserved, and reserves it until release.
func port(below int) (p int, release func(), err error) {
	if below <= lowest {
		return 0, nil, fmt.Errorf("loopback: no ports below the ephemeral range (it starts at %d)", below)
	}
	for range 100 {
		p = lowest + rand.IntN(below-lowest)
		var ok bool
		if release, ok = reserve(p); !ok {
			err = fmt.Errorf("port %d reserved by another process", p)
			continue
		}
		var l net.Listener
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			return p, release, nil
		}
		release()
	}
	return 0, nil, fmt.Errorf("loopback: no free port in [%d, %d): %v", lowest, below, err)
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
