//go:build !unix

package main

import (
	"errors"
	"os"
	"runtime"
	"syscall"
)

// errNoPause says why the run cannot be done here: its scenario stops
// hub B (SIGSTOP) and continues it, which only Unix systems do.
var errNoPause = errors.New("clusterload stops hub B and continues it (SIGSTOP, SIGCONT): " +
	runtime.GOOS + " cannot pause a process; run it on a Unix system")

func stopProcess(*os.Process) error     { return errNoPause }
func continueProcess(*os.Process) error { return errNoPause }

// asPostgres returns nil: only Unix systems run programs as root, which
// PostgreSQL refuses.
func asPostgres(string) *syscall.SysProcAttr { return nil }
