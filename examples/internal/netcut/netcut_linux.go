package netcut

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// shutdown writes last on the socket of c and shuts it down, through a
// descriptor of this process that refers to it (its own, or the
// duplicate a hub kept). It reports an error when no descriptor does.
func shutdown(c net.Conn, last []byte) error {
	inode, err := inodeOf(c)
	if err != nil {
		return err
	}
	links, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		return err
	}
	for _, l := range links {
		if dest, err := os.Readlink(l); err != nil || dest != "socket:["+strconv.FormatUint(inode, 10)+"]" {
			continue
		}
		n, err := strconv.Atoi(filepath.Base(l))
		if err != nil {
			continue
		}
		// A duplicate of our own, checked: the number may have been
		// closed and reused since it was read.
		fd, err := unix.FcntlInt(uintptr(n), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Ino != inode {
			unix.Close(fd)
			continue
		}
		for len(last) > 0 { // a few bytes on a socket that is not full
			w, err := unix.Write(fd, last)
			if err != nil {
				unix.Close(fd)
				return err
			}
			last = last[w:]
		}
		err = unix.Shutdown(fd, unix.SHUT_RDWR)
		unix.Close(fd)
		return err
	}
	return errors.New("netcut: no descriptor of this process refers to the connection's socket")
}

// inodeOf returns the inode of the socket of c, the server's end of a TCP
// connection, from /proc/net/tcp (IPv4) or /proc/net/tcp6.
func inodeOf(c net.Conn) (uint64, error) {
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("netcut: %T is not a TCP connection", c)
	}
	file, l, r := "/proc/net/tcp", hex4(local), hex4(remote)
	if local.IP.To4() == nil {
		file, l, r = "/proc/net/tcp6", hex6(local), hex6(remote)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == l && f[2] == r {
			inode, err := strconv.ParseUint(f[9], 10, 64)
			if err == nil && inode != 0 {
				return inode, nil
			}
		}
	}
	return 0, fmt.Errorf("netcut: no open socket %v → %v", local, remote)
}

// hex4 and hex6 write an address as /proc/net/tcp and tcp6 do: the
// address in 32-bit words of host order, the port in hex.
func hex4(a *net.TCPAddr) string {
	return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a.IP.To4()), a.Port)
}

func hex6(a *net.TCPAddr) string {
	ip := a.IP.To16()
	var b strings.Builder
	for i := 0; i < 16; i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:i+4]))
	}
	return fmt.Sprintf("%s:%04X", b.String(), a.Port)
}
