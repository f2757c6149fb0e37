package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/storetest"
)

// hubProcessEnv, set to 1, makes the test binary run as the standalone
// command (see TestMain).
const hubProcessEnv = "MERCURE_STANDALONE_PROCESS"

// clusterTopic is the topic of every update of the cluster test.
const clusterTopic = "https://example.com/cluster"

// clusterEnd is the id of the last update, published once the traffic
// ended: every subscriber must reach it.
const clusterEnd = "end"

// Issue 40's done-when: three standalone hubs, each a process with a NATS
// node embedded (-nats-embed, its own directory; -nats-cluster and
// -nats-routes to the others) and no other server, are one replicated
// hub. Publishers send updates through the three (each update sent again,
// same id and data, until a hub acknowledges it), subscribers stream from
// the three; one hub is killed (SIGKILL: its node dies with it) amid the
// traffic, and its publisher and subscribers move to the others
// (subscribers resume with Last-Event-ID). The two others keep
// acknowledging and delivering; every acknowledged update is in the
// history once; every subscriber got every update after its start, once
// and in order, or was told of a gap; and the killed hub, restarted on
// its directory, catches up: a replay through it holds the whole history.
// The hubs are stopped with SIGTERM and must exit cleanly.
func TestStandalone_NATSEmbeddedCluster(t *testing.T) {
	natstest.Binary(t) // skips, as the other NATS tests, without MERCURE_TEST_NATS
	if testing.Short() {
		t.Skip("-short: three hubs forming a cluster, one killed and restarted, take seconds")
	}
	began := time.Now()
	dir := t.TempDir()
	var cluster []string
	for range 3 {
		cluster = append(cluster, storetest.Addr(t))
	}
	hubs := make([]*hubProcess, 3)
	for i := range hubs {
		name := fmt.Sprintf("hub-%d", i+1)
		hubs[i] = newHubProcess(t, name, dir, "-hub-url", "https://hub.example/.well-known/mercure",
			"-insecure-publish", "-anonymous", "-history", "100000", "-log-level", "warn",
			"-nats-embed", filepath.Join(dir, name), "-nats-cluster", cluster[i], "-nats-routes", strings.Join(cluster, ","))
		hubs[i].start(t)
	}
	for _, h := range hubs {
		h.waitListening(t)
	}
	bases := make([]string, len(hubs))
	for i, h := range hubs {
		bases[i] = h.base()
	}
	t.Logf("cluster formed, hubs listening, %.1fs after the start", time.Since(began).Seconds())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var followers []*clusterFollower
	for i := range 6 {
		f := &clusterFollower{bases: bases, at: i % len(bases), done: make(chan struct{})}
		followers = append(followers, f)
		go f.run(ctx)
	}
	defer func() {
		cancel()
		for _, f := range followers {
			<-f.done
		}
		streamClient.CloseIdleConnections()
	}()
	storetest.WaitFor(t, "every subscriber's stream to open", func() bool {
		for _, f := range followers {
			if f.lastID() == "" {
				return false
			}
		}
		return true
	})

	led := &clusterLedger{attempted: map[string]bool{}, acked: map[string]time.Time{}}
	pctx, stopPublishing := context.WithCancel(ctx)
	defer stopPublishing()
	// A publisher that cannot get an update acknowledged within this
	// gives up: the waits below then fail, saying what they waited for.
	giveUp, giveUpCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer giveUpCancel()
	pubs := make([]*clusterPublisher, len(hubs))
	var wg sync.WaitGroup
	for i := range pubs {
		pubs[i] = &clusterPublisher{name: fmt.Sprintf("p%d", i+1), bases: bases, at: i}
		wg.Go(func() { pubs[i].run(pctx, giveUp, led) })
	}
	ackedEach := func(n int64) func() bool {
		return func() bool {
			for _, p := range pubs {
				if p.acked.Load() < n {
					return false
				}
			}
			return true
		}
	}
	storetest.WaitFor(t, "each publisher to get 20 updates acknowledged", ackedEach(20))

	hubs[2].kill()
	killed := time.Now()
	before := led.count()
	t.Logf("hub-3 killed (SIGKILL) after %d acknowledged updates", before)
	// Every publisher, that of hub-3 through another hub, gets 20 more
	// acknowledged: the two survivors go on.
	var more int64 = 20
	for _, p := range pubs {
		more = max(more, p.acked.Load()+20)
	}
	storetest.WaitFor(t, "each publisher to get 20 more updates acknowledged after the kill", ackedEach(more))
	stopPublishing()
	wg.Wait()
	if back := led.firstAckAfter(killed); back < 0 {
		t.Fatal("no publish sent after the kill was acknowledged")
	} else {
		t.Logf("first publish sent after the kill acknowledged %.2fs after it; %d acknowledged after it", back.Seconds(), led.count()-before)
	}
	if id := led.unacknowledged(); id != "" {
		t.Fatalf("update %s never acknowledged", id)
	}
	endPub := &clusterPublisher{name: "end", bases: bases[:2]}
	if !endPub.publishOne(giveUp, clusterEnd) {
		t.Fatal("the last update was never acknowledged")
	}
	if !storetest.Within(storetest.Deadline, func() bool {
		for _, f := range followers {
			if f.lastID() != clusterEnd {
				return false
			}
		}
		return true
	}) {
		for i, f := range followers {
			t.Logf("subscriber %d: %s", i, f)
		}
		t.Fatalf("not every subscriber got the last update within %v", storetest.Deadline)
	}

	history := replayHistory(t, bases[0])
	led.checkHistory(t, history)
	gaps, moved := 0, 0
	for i, f := range followers {
		g, err := f.check(history)
		if err != nil {
			t.Errorf("subscriber %d: %v", i, err)
		}
		gaps += g
		if f.moved() {
			moved++
		}
	}
	t.Logf("%d updates in the history, each once; %d subscribers got every one after their start, in order, %d moved to another hub, %d told of a gap",
		len(history), len(followers), moved, gaps)
	if moved < 2 {
		t.Errorf("%d subscribers moved to another hub, want hub-3's 2 at least", moved)
	}

	restarted := time.Now()
	hubs[2].start(t)
	hubs[2].waitListening(t)
	if again := replayHistory(t, bases[2]); !slices.Equal(again, history) {
		t.Fatalf("replay through the restarted hub-3: %d updates, want the %d of the history", len(again), len(history))
	}
	t.Logf("hub-3 restarted on its directory, caught up, replayed the whole history %.1fs after its restart", time.Since(restarted).Seconds())

	for _, h := range hubs {
		if err := h.stop(); err != nil {
			t.Errorf("%s after SIGTERM: %v", h.name, err)
		}
	}
	for _, h := range hubs {
		if log := h.log(); strings.Contains(log, "DATA RACE") || strings.Contains(log, "panic:") {
			t.Errorf("%s:\n%s", h.name, log)
		}
	}
}

// hubProcess is a standalone hub in a process of its own: the test
// binary, run again as the command (see TestMain), so that a test can
// kill it as a crash would and start it again with the same flags.
type hubProcess struct {
	name    string
	addr    string
	args    []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd exited
	err  error         // what cmd.Wait returned
}

// newHubProcess returns a hub, not started, listening on a port of its
// own with args; its output goes to NAME.log in dir, shown if the test
// fails. The process is killed when the test ends.
func newHubProcess(t *testing.T, name, dir string, args ...string) *hubProcess {
	t.Helper()
	addr := storetest.Addr(t)
	h := &hubProcess{name: name, addr: addr, args: append([]string{"-addr", addr}, args...),
		logPath: filepath.Join(dir, name+".log")}
	t.Cleanup(func() {
		h.kill()
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, h.log())
		}
	})
	return h
}

// base returns the hub's URL.
func (h *hubProcess) base() string { return "http://" + h.addr + "/.well-known/mercure" }

// start starts the hub's process.
func (h *hubProcess) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], h.args...)
	cmd.Env = append(os.Environ(), hubProcessEnv+"=1")
	out, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	h.mu.Lock()
	h.cmd, h.done, h.err = cmd, done, nil
	h.mu.Unlock()
	go func() {
		err := cmd.Wait()
		out.Close()
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
		close(done)
	}()
}

// waitListening waits until the hub accepts connections: once its NATS
// node is ready, which for a new cluster takes every node. It fails t if
// the process exits first.
func (h *hubProcess) waitListening(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	done := h.done
	h.mu.Unlock()
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	ok := storetest.Within(natstest.Patient, func() bool {
		if exited() {
			return true
		}
		c, err := net.Dial("tcp", h.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	switch {
	case exited():
		h.mu.Lock()
		err := h.err
		h.mu.Unlock()
		t.Fatalf("%s exited before it listened: %v", h.name, err)
	case !ok:
		t.Fatalf("%s did not listen within %v", h.name, natstest.Patient)
	}
}

// kill kills the process (SIGKILL), if it runs, and waits for its end.
func (h *hubProcess) kill() {
	h.mu.Lock()
	cmd, done := h.cmd, h.done
	h.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// stop ends the process as an operator would (SIGTERM), and returns what
// it exited with; it kills it if it has not exited within a minute.
func (h *hubProcess) stop() error {
	h.mu.Lock()
	cmd, done := h.cmd, h.done
	h.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		h.kill()
		return errors.New("still running a minute after SIGTERM")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// log returns what the process wrote, over all its runs.
func (h *hubProcess) log() string {
	b, _ := os.ReadFile(h.logPath)
	return string(b)
}

// streamClient is the client of the cluster test's subscribers and
// replays.
var streamClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// clusterLedger records the cluster test's updates: every one attempted,
// and when each was acknowledged.
type clusterLedger struct {
	mu        sync.Mutex
	attempted map[string]bool
	acked     map[string]time.Time
	sent      map[string]time.Time // when the acknowledged attempt was sent
}

func (l *clusterLedger) attempt(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempted[id] = true
}

func (l *clusterLedger) ack(id string, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[id] = time.Now()
	if l.sent == nil {
		l.sent = map[string]time.Time{}
	}
	l.sent[id] = sent
}

func (l *clusterLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// firstAckAfter returns how long after t the first update whose
// acknowledged attempt was sent after t was acknowledged; -1 if none.
func (l *clusterLedger) firstAckAfter(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := time.Duration(-1)
	for id, sent := range l.sent {
		if d := l.acked[id].Sub(t); sent.After(t) && (first < 0 || d < first) {
			first = d
		}
	}
	return first
}

// unacknowledged returns an update attempted and never acknowledged, ""
// if none.
func (l *clusterLedger) unacknowledged() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.attempted {
		if _, ok := l.acked[id]; !ok {
			return id
		}
	}
	return ""
}

// checkHistory checks the history, ids in order: every acknowledged
// update in it once, and nothing else but the last update.
func (l *clusterLedger) checkHistory(t *testing.T, history []string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]int{}
	for _, id := range history {
		seen[id]++
		if !l.attempted[id] && id != clusterEnd {
			t.Errorf("update %s in the history was never published", id)
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("update %s is %d times in the history", id, n)
		}
	}
	for id := range l.acked {
		if seen[id] == 0 {
			t.Errorf("update %s acknowledged, not in the history", id)
		}
	}
}

// clusterPublisher publishes updates, one at a time, each sent again
// until a hub acknowledges it: to the hub it is at, then to the next when
// that one refuses or cannot be reached.
type clusterPublisher struct {
	name  string
	bases []string
	at    int // the hub it sends to; its goroutine's
	acked atomic.Int64
}

// run publishes until ctx ends, the update it began included; each
// update's retries end with giveUp.
func (p *clusterPublisher) run(ctx, giveUp context.Context, l *clusterLedger) {
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("%s-%d", p.name, n)
		l.attempt(id)
		for {
			sent := time.Now()
			if p.post(id) {
				l.ack(id, sent)
				p.acked.Add(1)
				break
			}
			p.at = (p.at + 1) % len(p.bases)
			select {
			case <-giveUp.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// publishOne publishes the update id until a hub acknowledges it, or
// giveUp ends; true once acknowledged.
func (p *clusterPublisher) publishOne(giveUp context.Context, id string) bool {
	for !p.post(id) {
		p.at = (p.at + 1) % len(p.bases)
		select {
		case <-giveUp.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// post sends the update id once; true if the hub acknowledged it.
func (p *clusterPublisher) post(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	form := url.Values{"topic": {clusterTopic}, "id": {id}, "data": {"update " + id}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.bases[p.at], strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := streamClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode == http.StatusOK
}

// sseConn is what one connection of a subscriber got.
type sseConn struct {
	hub       int
	requested string   // the Last-Event-ID sent, "" for none
	cursor    string   // the hub's Mercure-Last-Event-ID, or the position a stream without one opened at
	ids       []string // the events, in order
}

// clusterFollower is a subscriber that behaves as an EventSource behind a
// load balancer: it resumes with the last id it saw, on its hub, and on
// the next one when its hub cannot be reached or refuses it.
type clusterFollower struct {
	bases []string
	at    int // the hub it streams from; its goroutine's
	done  chan struct{}

	mu    sync.Mutex
	conns []sseConn
	last  string
}

func (f *clusterFollower) lastID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// String describes the subscriber's connections, for a failure.
func (f *clusterFollower) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "last %q;", f.last)
	for _, c := range f.conns {
		last := ""
		if len(c.ids) > 0 {
			last = c.ids[len(c.ids)-1]
		}
		fmt.Fprintf(&b, " [hub-%d Last-Event-ID %q cursor %q: %d events up to %q]", c.hub+1, c.requested, c.cursor, len(c.ids), last)
	}
	return b.String()
}

// moved reports whether the subscriber streamed from several hubs.
func (f *clusterFollower) moved() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		if c.hub != f.conns[0].hub {
			return true
		}
	}
	return false
}

// run streams until ctx ends.
func (f *clusterFollower) run(ctx context.Context) {
	defer close(f.done)
	for ctx.Err() == nil {
		if !f.connect(ctx) {
			f.at = (f.at + 1) % len(f.bases)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// connect opens one stream, resuming after the last id seen, and reads
// it until it ends; false if the hub could not be reached or refused it.
func (f *clusterFollower) connect(ctx context.Context) bool {
	last := f.lastID()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.bases[f.at]+"?match="+url.QueryEscape(clusterTopic), nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	res, err := streamClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, res.Body)
		return false
	}
	c := sseConn{hub: f.at, requested: last}
	if last != "" {
		c.cursor = res.Header.Get("Mercure-Last-Event-ID")
	}
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
	readEvents(res.Body, func(id string, data bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		c := &f.conns[len(f.conns)-1]
		switch {
		case data:
			c.ids = append(c.ids, id)
			f.last = id
		case last == "" && c.cursor == "" && len(c.ids) == 0:
			c.cursor = id // the position a stream opened without cursor starts at
			f.last = id
		}
	})
	return true
}

// check checks the subscriber's connections against the history: from
// the position its first stream opened at, every update once and in
// order, across its resumes, up to the last update; a resume that the
// hub answered with another cursor than the one asked for told of a gap,
// and the events then start after that cursor. It returns the gaps told.
func (f *clusterFollower) check(history []string) (gaps int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	index := make(map[string]int, len(history))
	for i, id := range history {
		index[id] = i
	}
	after := func(cursor string) (int, bool) {
		if cursor == "earliest" {
			return 0, true
		}
		i, ok := index[cursor]
		return i + 1, ok
	}
	next, started := 0, false
	for n, c := range f.conns {
		switch {
		case c.requested == "" && started:
			return gaps, fmt.Errorf("connection %d opened without Last-Event-ID after the subscriber's start", n)
		case c.requested == "" || c.cursor != c.requested:
			if c.requested != "" {
				gaps++
			}
			if c.cursor == "" && len(c.ids) == 0 {
				continue // ended before its position
			}
			i, ok := after(c.cursor)
			if !ok {
				return gaps, fmt.Errorf("connection %d: cursor %q is not in the history", n, c.cursor)
			}
			next, started = i, true
		}
		for _, id := range c.ids {
			if next >= len(history) || history[next] != id {
				want := "nothing"
				if next < len(history) {
					want = history[next]
				}
				return gaps, fmt.Errorf("connection %d (hub-%d, Last-Event-ID %q, cursor %q): got %s, want %s", n, c.hub+1, c.requested, c.cursor, id, want)
			}
			next++
		}
	}
	if next != len(history) {
		return gaps, fmt.Errorf("got up to event %d of %d", next, len(history))
	}
	return gaps, nil
}

// readEvents reads an event stream, calling event for each block with an
// id: data tells whether it fires an event.
func readEvents(r io.Reader, event func(id string, data bool)) {
	sc := bufio.NewScanner(r)
	var id string
	var data bool
	for sc.Scan() {
		switch line := sc.Text(); {
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

// replayHistory replays the whole history through the hub at base
// (Last-Event-ID: earliest) up to the last update, and returns its ids.
func replayHistory(t *testing.T, base string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), natstest.Patient)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"?match="+url.QueryEscape(clusterTopic), nil)
	req.Header.Set("Last-Event-ID", "earliest")
	res, err := streamClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("replay through %s: %d", base, res.StatusCode)
	}
	var ids []string
	readEvents(res.Body, func(id string, data bool) {
		if data && (len(ids) == 0 || ids[len(ids)-1] != clusterEnd) {
			ids = append(ids, id)
			if id == clusterEnd {
				cancel()
			}
		}
	})
	if len(ids) == 0 || ids[len(ids)-1] != clusterEnd {
		t.Fatalf("the replay through %s ended after %d updates, before the last", base, len(ids))
	}
	return ids
}
