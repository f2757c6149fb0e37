// Command clusterload runs two examples/standalone hubs on one store
// (Redis or PostgreSQL, a server of its own), subscribers split between
// them and publishers on both; it SIGSTOPs hub B for a while and
// continues it, then kills the store and restarts it. At the end it
// checks every subscriber's events against the store's order (see
// internal/seqcheck): nothing lost without a reported gap, nothing
// twice; and hub B's peak RSS against its limits.
//
//	go run ./internal/cmd/clusterload -store redis
//	go run ./internal/cmd/clusterload -store postgres
//
// It exits 1 if an update was lost silently or received twice, or if hub
// B's RSS went past its bound. It is a command, not a test: a run takes
// about a minute and two processor cores.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
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

	"github.com/mercurekit/mercure/internal/loopback"
	"github.com/mercurekit/mercure/internal/seqcheck"
)

const topic = "https://example.com/load"

func main() {
	var (
		storeKind  = flag.String("store", "redis", "redis or postgres: a server of the run's own, killed and restarted")
		standalone = flag.String("standalone", "", "examples/standalone binary (default: built from ./examples/standalone)")
		subs       = flag.Int("subs", 1000, "subscribers, split between the hubs")
		rate       = flag.Int("rate", 200, "updates per second, split between the hubs")
		warm       = flag.Duration("warm", 10*time.Second, "traffic before hub B is stopped")
		pause      = flag.Duration("pause", 10*time.Second, "how long hub B stays SIGSTOPped")
		between    = flag.Duration("between", 10*time.Second, "traffic between SIGCONT and the store's kill")
		down       = flag.Duration("down", 3*time.Second, "how long the store stays down")
		after      = flag.Duration("after", 15*time.Second, "traffic after the store's restart")
		maxQueued  = flag.Int64("max-queued-bytes", 16<<20, "the hubs' -max-queued-bytes")
		maxPending = flag.Int("max-pending-updates", 256, "the hubs' -max-pending-updates")
		slack      = flag.Int64("rss-slack", 48<<20, "RSS hub B may take above its RSS before the pause and twice -max-queued-bytes (the streams' queues and the feed's backlog): the runtime's own")
	)
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if errNoPause != nil {
		log.Fatal(errNoPause)
	}
	dir, err := os.MkdirTemp("", "clusterload-")
	check(err)
	defer os.RemoveAll(dir)
	if *standalone == "" {
		*standalone = filepath.Join(dir, "standalone")
		out, err := exec.Command("go", "build", "-o", *standalone, "./examples/standalone").CombinedOutput()
		if err != nil {
			fatalf("building examples/standalone (run from the repository's root): %v\n%s", err, out)
		}
	}
	st := startStore(*storeKind, dir)
	defer st.kill()
	hubArgs := []string{"-anonymous", "-insecure-publish", "-store", st.url, "-log-level", "error",
		"-max-queued-bytes", fmt.Sprint(*maxQueued), "-max-pending-updates", fmt.Sprint(*maxPending),
		"-max-connections", fmt.Sprint(*subs + 100), "-history", "1000000"}
	a := startHub(*standalone, "A", hubArgs)
	defer a.stop()
	b := startHub(*standalone, "B", hubArgs)
	defer b.stop()

	var followers []*follower
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range *subs {
		h := a
		if i%2 == 1 {
			h = b
		}
		f := &follower{base: h.base}
		followers = append(followers, f)
		go f.run(ctx)
	}
	waitAll("every subscriber's stream to open", 60*time.Second, func() bool {
		for _, f := range followers {
			if f.opened.Load() == 0 {
				return false
			}
		}
		return true
	})
	log.Printf("%d subscribers open", *subs)

	pctx, stopPublishing := context.WithCancel(ctx)
	var pubs sync.WaitGroup
	var acked, refused atomic.Int64
	for _, h := range []*hub{a, b} {
		pubs.Go(func() { publishLoop(pctx, h, *rate/2, &acked, &refused) })
	}
	started := time.Now()
	rss := &sampler{pid: b.cmd.Process.Pid}
	go rss.run(ctx)

	time.Sleep(*warm)
	base := rss.now()
	log.Printf("SIGSTOP hub B (RSS %d MiB) for %v", base>>20, *pause)
	check(stopProcess(b.cmd.Process))
	time.Sleep(*pause)
	check(continueProcess(b.cmd.Process))
	log.Printf("SIGCONT hub B")
	time.Sleep(*between)
	log.Printf("killing the store for %v", *down)
	st.kill()
	time.Sleep(*down)
	st.start()
	log.Printf("store restarted")
	time.Sleep(*after)
	elapsed := time.Since(started)
	stopPublishing()
	pubs.Wait()
	end := "end"
	for !publish(a, end) {
		time.Sleep(100 * time.Millisecond)
	}
	acked.Add(1)
	waitAll("every subscriber to get the last update", 60*time.Second, func() bool {
		for _, f := range followers {
			if f.lastID() != end {
				return false
			}
		}
		return true
	})
	cancel()
	order := storeOrder(a.base, end)
	o := seqcheck.NewOrder(order, nil)
	var sum seqcheck.Result
	ends := 0
	for _, f := range followers {
		r := f.check(o, end)
		sum.Add(r)
		ends += int(f.ends.Load())
	}
	bound := base + 2**maxQueued + *slack
	peak := rss.peak.Load()
	fmt.Printf("store %s: %d subscribers, %d updates acknowledged in %v (%.0f/s; %d publishes refused, sent again), %d in the store\n",
		*storeKind, *subs, acked.Load(), elapsed.Round(time.Second), float64(acked.Load())/elapsed.Seconds(), refused.Load(), len(order))
	fmt.Printf("delivered %d, streams ended by a hub %d, resumes answered with another cursor %d (updates skipped at them %d, received again %d)\n",
		sum.Delivered, ends, sum.Gaps, sum.LostWithGap, sum.Redelivered)
	fmt.Printf("lost silently %d, duplicates %d, unknown %d, missing %d\n", sum.LostSilently, sum.Duplicates, sum.Unknown, sum.Missing)
	fmt.Printf("hub B RSS: %d MiB before the pause, peak %d MiB, bound %d MiB\n", base>>20, peak>>20, bound>>20)
	for _, e := range sum.Errors {
		fmt.Println("  ", e)
	}
	if !sum.OK() || int64(len(order)) != acked.Load() || peak > bound {
		a.stop()
		b.stop()
		st.kill()
		os.Exit(1)
	}
}

func check(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

var exits []func()

// atExit runs f when the run fails: no server outlives it.
func atExit(f func()) { exits = append(exits, f) }

func fatalf(format string, args ...any) {
	for _, f := range exits {
		f()
	}
	log.Fatalf(format, args...)
}

func waitAll(what string, limit time.Duration, cond func() bool) {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort returns a loopback port that no outgoing connection can take
// while the store is down (see package loopback).
func freePort() int {
	p, err := loopback.Free()
	check(err)
	return p
}

// hub is a standalone process.
type hub struct {
	name string
	base string
	cmd  *exec.Cmd
}

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
// acknowledged.
func publishLoop(ctx context.Context, h *hub, perSecond int, acked, refused *atomic.Int64) {
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
			for !publish(h, id) {
				refused.Add(1)
				time.Sleep(100 * time.Millisecond)
			}
			acked.Add(1)
		})
	}
}

// sampler records a process's peak RSS.
type sampler struct {
	pid  int
	peak atomic.Int64
}

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

func (s *sampler) run(ctx context.Context) {
	for ctx.Err() == nil {
		if v := s.now(); v > s.peak.Load() {
			s.peak.Store(v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// follower is a subscriber that behaves as an EventSource: it resumes
// with the last id it saw (its position block included), on its hub.
type follower struct {
	base   string
	rec    seqcheck.Recorder
	opened atomic.Int32
	ends   atomic.Int32 // streams the hub ended
}

func (f *follower) lastID() string { return f.rec.Last() }

func (f *follower) check(o seqcheck.Order, until string) seqcheck.Result {
	return f.rec.Check(o, until)
}

var streamClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}

func (f *follower) run(ctx context.Context) {
	for ctx.Err() == nil {
		if !f.connect(ctx) {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // refused: try again
			}
		}
	}
}

func (f *follower) connect(ctx context.Context) bool {
	last := f.lastID()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"?match="+url.QueryEscape(topic), nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return false
	}
	f.opened.Add(1)
	f.rec.Read(resp, last)
	if ctx.Err() == nil {
		f.ends.Add(1)
	}
	return true
}

// readStream calls event for each block with an id, as an EventSource
// reads them: data tells whether it fires an event.
func readStream(r io.Reader, event func(id string, data bool)) {
	sc := bufio.NewScanner(r)
	var id string
	var data bool
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if id != "" {
				event(id, data)
			}
			id, data = "", false
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data:"):
			data = true
		}
	}
}

// storeOrder replays the history through a hub, up to the event until.
func storeOrder(base, until string) []string {
	req, _ := http.NewRequest(http.MethodGet, base+"?match="+url.QueryEscape(topic), nil)
	req.Header.Set("Last-Event-ID", seqcheck.Earliest)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := streamClient.Do(req.WithContext(ctx))
	check(err)
	defer resp.Body.Close()
	var ids []string
	done := false
	readStream(resp.Body, func(id string, data bool) {
		if data && !done {
			ids = append(ids, id)
			if id == until {
				done = true
				cancel()
			}
		}
	})
	if !done {
		fatalf("the replay of the history ended before %q", until)
	}
	return ids
}

// store is the run's own store server.
type store struct {
	kind, dir, url string
	port           int
	sys            *syscall.SysProcAttr // nil, or to run as postgres
	cmd            *exec.Cmd
}

func startStore(kind, dir string) *store {
	s := &store{kind: kind, dir: dir, port: freePort()}
	switch kind {
	case "redis":
		s.url = fmt.Sprintf("redis://127.0.0.1:%d/0", s.port)
	case "postgres":
		s.sys = asPostgres(dir)
		out, err := s.command(pgBin("initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput()
		if err != nil {
			fatalf("initdb: %v\n%s", err, out)
		}
		s.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", s.port)
	default:
		fatalf("-store %q: want redis or postgres", kind)
	}
	s.start()
	return s
}

func (s *store) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = s.sys
	return cmd
}

// start starts the server on its port and data, and waits until it
// accepts connections.
func (s *store) start() {
	port := strconv.Itoa(s.port)
	if s.kind == "redis" {
		s.cmd = s.command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", s.dir, "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log"))
	} else {
		s.cmd = s.command(pgBin("postgres"), "-D", filepath.Join(s.dir, "data"), "-p", port,
			"-c", "listen_addresses=127.0.0.1", "-k", s.dir, "-c", "max_connections=200")
	}
	check(s.cmd.Start())
	cmd := s.cmd
	atExit(func() { cmd.Process.Kill() })
	waitAll("the store to listen", 30*time.Second, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if s.kind == "postgres" {
		time.Sleep(500 * time.Millisecond) // past the recovery that follows the listen
	}
}

// kill stops the server as a crash would: SIGKILL for Redis, an
// immediate shutdown (SIGQUIT, no checkpoint) for PostgreSQL.
func (s *store) kill() {
	if s.cmd == nil {
		return
	}
	if s.kind == "redis" {
		s.cmd.Process.Kill()
	} else {
		s.cmd.Process.Signal(syscall.SIGQUIT)
	}
	s.cmd.Wait()
	s.cmd = nil
}

// pgBin returns the path of a PostgreSQL server program: from PATH, or
// from Debian's /usr/lib/postgresql/*/bin.
func pgBin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(m) == 0 {
		fatalf("%s not found: install PostgreSQL's server programs", name)
	}
	return m[len(m)-1]
}
