//go:build unix

package natstest

import (
	"syscall"
	"testing"
)

// Pause stops the server without closing its connections (SIGSTOP): it
// answers nothing, and takes no part in its cluster's elections, until
// [Server.Resume]. Its clients notice only by their pings.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGSTOP)
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGCONT)
}

func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		t.Fatalf("natstest: signal %v to %s, which does not run", sig, s.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("natstest: signal %v to %s: %v", sig, s.Name, err)
	}
}
