package main

import (
	"path/filepath"
	"strconv"
	"syscall"
)

// redisServer returns a Redis server, not started, on a free port, in a
// directory of its own under dir, with args added. It saves no snapshot;
// args say whether it keeps an append-only file.
func redisServer(name, dir string, args ...string) *server {
	s := &server{name: name, port: freePort(), dir: serverDir(dir, name), crash: syscall.SIGKILL}
	s.argv = append([]string{"redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log")}, args...)
	return s
}
