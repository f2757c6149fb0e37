//go:build unix

package redistest

import "syscall"

// Pause stops the server without closing its connections (SIGSTOP): it
// answers nothing, as a hung process or a dropped network would.
func (s *Server) Pause() {
	s.paused = true
	s.cmd.Process.Signal(syscall.SIGSTOP)
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() {
	s.paused = false
	s.cmd.Process.Signal(syscall.SIGCONT)
}
