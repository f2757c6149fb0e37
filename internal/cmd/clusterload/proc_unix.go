//go:build unix

package main

import (
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// errNoPause is nil: Unix systems stop and continue processes.
var errNoPause error

// stopProcess stops p where it is, as a machine that freezes would: p
// keeps its connections and answers nothing until continueProcess.
func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

func continueProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// asPostgres returns the attributes that run PostgreSQL's programs as
// the user postgres, and gives it dir, when this process is root:
// PostgreSQL refuses to run as root. It returns nil otherwise.
func asPostgres(dir string) *syscall.SysProcAttr {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	check(err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	check(os.Chown(dir, uid, gid))
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
}
