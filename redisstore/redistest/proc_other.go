//go:build !unix

package redistest

import "runtime"

// Pause skips the test: only Unix systems stop a process without ending
// it (SIGSTOP).
func (s *Server) Pause() {
	s.t.Helper()
	s.t.Skip("redistest: Pause needs SIGSTOP, which " + runtime.GOOS + " lacks")
}

// Resume does nothing: Pause paused nothing.
func (s *Server) Resume() {}
