package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// hub is a standalone process.
type hub struct {
	name string
	base string
	cmd  *exec.Cmd
}

// startHub starts a hub and waits until it listens. Its output goes to
// clusterload-hub-NAME.log in the temporary directory, kept after the run
// for a look at what a hub said.
func startHub(bin, name string, args []string) *hub {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort())
	cmd := exec.Command(bin, append([]string{"-addr", addr}, args...)...)
	logf, err := os.Create(filepath.Join(os.TempDir(), "clusterload-hub-"+name+".log"))
	check(err)
	cmd.Stdout, cmd.Stderr = logf, logf
	check(cmd.Start())
	logf.Close()
	atExit(func() { continueProcess(cmd.Process); cmd.Process.Kill() })
	waitAll("hub "+name+" to listen", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return &hub{name: name, base: "http://" + addr + "/.well-known/mercure", cmd: cmd}
}

// stop ends the hub as an operator would (SIGTERM), continuing it first
// if it was stopped; it kills it if it has not exited within 10 s.
func (h *hub) stop() {
	continueProcess(h.cmd.Process)
	h.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		h.cmd.Process.Kill()
	}
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// publish sends one update; true once the hub acknowledged it.
func publish(h *hub, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	form := url.Values{"topic": {topic}, "id": {id}, "data": {"update " + id}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.base, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// publishLoop publishes perSecond updates a second to h until ctx ends,
// up to 16 at once, each sent again (same id, same data: recorded once)
// until acknowledged, even after ctx ended: every update it began is
// publishLoop publishes perSecond updates a second to h until ctx ends,
// up to 16 at once, each sent again (same id, same data: recorded once)
// until acknowledged, even after ctx ended: every update it began is
// acknowledged. l records every attempt.
func publishLoop(ctx context.Context, l *ledger, h *hub, perSecond int) {
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	slots := make(chan struct{}, 16)
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		id := fmt.Sprintf("%s%d", h.name, n)
		wg.Go(func() {
			defer func() { <-slots }()
			for !l.publish(h, id) {
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// sampler records a process's peak RSS.
type sampler struct {
	pid  int
	peak atomic.Int64
}

// now returns the process's RSS (VmRSS), 0 if unknown.
func (s *sampler) now() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// run samples the RSS every 100 ms until ctx ends, keeping the peak.
func (s *sampler) run(ctx context.Context) {
	for ctx.Err() == nil {
		if v := s.now(); v > s.peak.Load() {
			s.peak.Store(v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop stops p (SIGSTOP) and returns once it is stopped: the signal is
// delivered after kill returns, and a hub that runs meanwhile may answer
// a publish sent after the stop. Where /proc does not say (not Linux),
// it returns at once.
func stop(p *os.Process) error {
	if err := stopProcess(p); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for !stopped(p.Pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped 5s after SIGSTOP", p.Pid)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// stopped reports whether every thread of process pid is stopped, as
// /proc/PID/task/*/stat says; true if /proc says nothing.
func stopped(pid int) bool {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err == nil && !statStopped(string(b)) {
			return false
		}
	}
	return true
}

// statStopped reports whether a /proc/…/stat line, "TID (COMM) STATE
// …", says stopped (T) or traced (t). COMM may hold spaces and
// parentheses: the state follows the last ')'.
func statStopped(line string) bool {
	i := strings.LastIndexByte(line, ')')
	f := strings.Fields(line[i+1:])
	return i >= 0 && len(f) > 0 && (f[0] == "T" || f[0] == "t")
}
