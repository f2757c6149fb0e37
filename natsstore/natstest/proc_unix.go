//go:build unix

package natstest

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/mercurekit/mercure/storetest"
)

// Pause stops the server without closing its connections (SIGSTOP): it
// answers nothing, and takes no part in its cluster's elections, until
// [Server.Resume]. Its clients notice only by their pings. On Linux it
// returns once the process is stopped: a signal is delivered in its own
// time, and the server would otherwise answer what a test sends right
// after.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	pid := s.signal(t, syscall.SIGSTOP)
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	if _, err := os.Stat(stat); err != nil {
		return // no /proc: not Linux
	}
	if !storetest.Within(Patient, func() bool { return stopped(stat) }) {
		t.Fatalf("natstest: %s not stopped %v after SIGSTOP", s.Name, Patient)
	}
}

// stopped tells whether the process whose /proc stat file is stat is
// stopped by a signal (state T).
func stopped(stat string) bool {
	b, err := os.ReadFile(stat)
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGCONT)
}

// signal sends sig to the server's process, and returns its pid.
func (s *Server) signal(t testing.TB, sig syscall.Signal) int {
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
	return cmd.Process.Pid
}
