//go:build !unix

package main

import "time"

// cpuTime is the process's CPU time where getrusage is missing: not
// measured, so the CPU figures are zero.
func cpuTime() time.Duration { return 0 }
