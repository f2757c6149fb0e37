//go:build unix

package pgtest

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

// owner is whom a server runs as, and who owns its directories (see
// credential).
type owner = syscall.Credential

// needSignals lets t go on: a server of a test's own is stopped and
// killed with signals (see Server.Kill and Server.Stop).
func needSignals(testing.TB) {}

// runAs makes cmd run as o, unless o is nil.
func runAs(cmd *exec.Cmd, o *owner) {
	if o != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o}
	}
}

// alive reports whether a process pid runs (or may: one that this
// process may not signal counts as running).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// crash ends a server as a crash would (see Server.Kill), stopped
// (SIGSTOP) or not.
func crash(s *Server) {
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Signal(syscall.SIGQUIT)
}
