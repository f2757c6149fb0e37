package main

import "syscall"

// setRcvBuf sets the receive buffer of the socket fd to n bytes: a
// socket is a Handle on Windows, not an int.
func setRcvBuf(fd uintptr, n int) error {
	return syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}
