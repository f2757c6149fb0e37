//go:build !linux

package engine

import (
	"net"
	"syscall"
)

// poller is Linux's only: elsewhere a goroutine reads each detached
// stream's connection (see Engine.read).
type poller struct{}

func newPoller(*Engine) (*poller, error) { return nil, errNoPoller }

func (*poller) add(*connState) error         { return errNoPoller }
func (*poller) watch(*connState, bool) error { return errNoPoller }
func (*poller) remove(*connState)            {}
func (*poller) stop()                        {}

// The engine keeps a net.Conn for every stream where no poller watches
// descriptors: these are never called.

func dupSocket(syscall.RawConn) (int, error) { return -1, errNoPoller }
func connOf(int) (net.Conn, error)           { return nil, errNoPoller }
func closeFD(int)                            {}
