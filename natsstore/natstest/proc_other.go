//go:build !unix

package natstest

import (
	"runtime"
	"testing"
)

// Pause skips the test: only Unix systems stop a process without ending
// it (SIGSTOP).
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	t.Skip("natstest: Pause needs SIGSTOP, which " + runtime.GOOS + " lacks")
}

// Resume does nothing: Pause paused nothing.
func (s *Server) Resume(t testing.TB) {}
