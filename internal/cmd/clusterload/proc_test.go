package main

import (
	"os/exec"
	"runtime"
	"testing"
)

// A stat line's state follows the command's name, which may hold spaces
// and parentheses.
func TestStatStopped(t *testing.T) {
	for line, want := range map[string]bool{
		"12 (standalone) T 1 12 12 0 -1":   true,
		"12 (a) b) (c) S 1 12 12 0 -1":     false,
		"13 (postgres: walsender) t 1 2 3": true,
		"14 (redis-server) R 1":            false,
		"garbage":                          false,
	} {
		if got := statStopped(line); got != want {
			t.Errorf("%q: stopped %v, want %v", line, got, want)
		}
	}
}

// stop returns once every thread of the process is stopped.
func TestStop(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc tells whether a process is stopped on Linux")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if stopped(cmd.Process.Pid) {
		t.Fatal("stopped before SIGSTOP")
	}
	if err := stop(cmd.Process); err != nil {
		t.Fatal(err)
	}
	if !stopped(cmd.Process.Pid) {
		t.Error("not stopped after stop")
	}
}
