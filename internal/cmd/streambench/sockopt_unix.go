//go:build unix

package main

import "syscall"

// setRcvBuf sets the receive buffer of the socket fd to n bytes.
func setRcvBuf(fd uintptr, n int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}
