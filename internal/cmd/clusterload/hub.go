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
	addr string
	bin  string
	args []string
	cmd  *exec.Cmd
	// dead is set while the schedule has the hub killed (hub-kill): its
	// subscribers and publishers go to the others, as a load balancer
	// that checks the hubs' health would send them.
	dead atomic.Bool
}

// newHub returns a hub, not started, that listens on a free port with
// args.
func newHub(bin, name string, args []string) *hub {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort())
	return &hub{name: name, addr: addr, base: "http://" + addr + "/.well-known/mercure", bin: bin,
		args: append([]string{"-addr", addr}, args...)}
}

// startHub starts a hub and waits until it listens.
func startHub(bin, name string, args []string) *hub {
	h := newHub(bin, name, args)
	h.start()
	h.waitListening()
	return h
}

// start starts the hub's process. Its output goes to
// clusterload-hub-NAME.log in the temporary directory, kept after the run
// for a look at what a hub said; a restart appends to it.
func (h *hub) start() {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if h.cmd != nil {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logf, err := os.OpenFile(filepath.Join(os.TempDir(), "clusterload-hub-"+h.name+".log"), flags, 0o644)
	check(err)
	cmd := exec.Command(h.bin, h.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	check(cmd.Start())
	logf.Close()
	atExit(func() { continueProcess(cmd.Process); cmd.Process.Kill() })
	h.cmd = cmd
}

// waitListening waits until the hub listens: with an embedded NATS node,
// once its cluster is ready, which a new cluster is once every node
// started.
func (h *hub) waitListening() {
	waitAll("hub "+h.name+" to listen", 2*time.Minute, func() bool {
		c, err := net.Dial("tcp", h.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// kill kills the hub as a crash would (SIGKILL), and waits for its end.
func (h *hub) kill() {
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// pick returns hubs[i], or the next hub alive when it is dead.
func pick(hubs []*hub, i int) *hub {
	for k := range hubs {
		if h := hubs[(i+k)%len(hubs)]; !h.dead.Load() {
			return h
		}
	}
	return hubs[i]
}

// stop ends the hub as an operator would (SIGTERM), continuing it first
// if it was stopped; it kills it if it has not exited within 10 s. A hub
// killed and never restarted has nothing to stop.
func (h *hub) stop() {
	if h.cmd.ProcessState != nil {
		return
	}
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

// publish sends one update, first sent at first (the data say when, for
// the delivery's latency: the same in every attempt, so that a retry is
// the same update); true once the hub acknowledged it.
func publish(h *hub, id string, first time.Time) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	form := url.Values{"topic": {topic}, "id": {id}, "data": {"update " + id + " t=" + strconv.FormatInt(first.UnixNano(), 10)}}
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

// publishLoop publishes perSecond updates a second to hubs[i] (to the next
// hub alive while it is dead) until ctx ends, up to 16 at once, each sent
// again (same id, same data: recorded once) until acknowledged, even
// after ctx ended: every update it began is acknowledged. l records every
// attempt.
func publishLoop(ctx context.Context, l *ledger, hubs []*hub, i, perSecond int) {
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
		id := fmt.Sprintf("%s%d", hubs[i].name, n)
		wg.Go(func() {
			defer func() { <-slots }()
			first := time.Now()
			for !l.publish(pick(hubs, i), id, first) {
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
