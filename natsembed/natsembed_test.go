package natsembed_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/natsembed"
)

// readyTimeout bounds the waits for a cluster to form or a node to catch
// up. They take about a second or two; the bound is for a slow machine.
const readyTimeout = 60 * time.Second

// logRecorder is a slog.Handler that keeps the lines of one test's nodes,
// printed if the test fails. It never calls t.Log, which a NATS goroutine
// could reach after the test ends.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
	attrs []slog.Attr
	root  *logRecorder
}

func newLogger(t *testing.T) (*slog.Logger, *logRecorder) {
	r := &logRecorder{}
	r.root = r
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range r.snapshot() {
				t.Log(l)
			}
		}
	})
	return slog.New(r), r
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", rec.Level, rec.Message)
	for _, a := range r.attrs {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
	}
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
		return true
	})
	r.root.mu.Lock()
	r.root.lines = append(r.root.lines, b.String())
	r.root.mu.Unlock()
	return nil
}

func (r *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{attrs: append(append([]slog.Attr(nil), r.attrs...), attrs...), root: r.root}
}

func (r *logRecorder) WithGroup(string) slog.Handler { return r }

func (r *logRecorder) snapshot() []string {
	r.root.mu.Lock()
	defer r.root.mu.Unlock()
	return append([]string(nil), r.root.lines...)
}

// start starts a node that the test's cleanup shuts down.
func start(t *testing.T, cfg natsembed.Config) *natsembed.Node {
	t.Helper()
	n, err := natsembed.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Shutdown)
	return n
}

// connect returns an in-process connection to n, closed by the test's
// cleanup (before n's shutdown, which was registered earlier).
func connect(t *testing.T, n *natsembed.Node) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := n.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// loopbackAddrs reserves k free loopback ports: it holds them all open
// while it picks them, so that they are distinct, then frees them for the
// nodes to take.
func loopbackAddrs(t *testing.T, k int) []string {
	t.Helper()
	addrs := make([]string, k)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs
}

// retry calls f until it succeeds or ctx ends, and returns f's last
// error then. It covers the seconds a replicated stream takes to elect a
// new leader.
func retry(ctx context.Context, f func(context.Context) error) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := f(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func readMsg(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) (string, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return "", err
	}
	return string(m.Data), nil
}

func TestSingleNodeKeepsMessagesAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	logger, logs := newLogger(t)

	n := start(t, natsembed.Config{Dir: dir, Logger: logger})
	if got := n.Replicas(); got != 1 {
		t.Errorf("Replicas() = %d, want 1", got)
	}
	if got := n.ClientURL(); got != "" {
		t.Errorf("ClientURL() = %q, want none without ClientListen", got)
	}
	if n.Name() == "" {
		t.Error("Name() is empty")
	}
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	nc, js := connect(t, n)
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "EVENTS",
		Subjects: []string{"events.>"},
		Replicas: n.Replicas(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, "events.a", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readMsg(ctx, js, "EVENTS", ack.Sequence); err != nil || got != "hello" {
		t.Fatalf("read %q, %v; want hello", got, err)
	}
	name := n.Name()
	nc.Close()
	n.Shutdown()
	n.Shutdown() // a second call does nothing
	if _, err := n.Connect(); !errors.Is(err, natsembed.ErrStopped) {
		t.Errorf("Connect after Shutdown: %v, want ErrStopped", err)
	}
	if err := n.WaitReady(ctx); !errors.Is(err, natsembed.ErrStopped) {
		t.Errorf("WaitReady after Shutdown: %v, want ErrStopped", err)
	}

	n = start(t, natsembed.Config{Dir: dir, Logger: logger})
	if n.Name() != name {
		t.Errorf("restarted node is named %q, was %q", n.Name(), name)
	}
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	_, js = connect(t, n)
	if got, err := readMsg(ctx, js, "EVENTS", ack.Sequence); err != nil || got != "hello" {
		t.Fatalf("after restart, read %q, %v; want hello", got, err)
	}

	var ready bool
	for _, l := range logs.snapshot() {
		if strings.HasPrefix(l, "INFO Server is ready") && strings.Contains(l, "nats_server="+name) {
			ready = true
		}
	}
	if !ready {
		t.Errorf("no INFO line \"Server is ready\" with nats_server=%s in the log:\n%s", name, strings.Join(logs.snapshot(), "\n"))
	}
}

func TestClientListener(t *testing.T) {
	t.Parallel()
	n := start(t, natsembed.Config{Dir: t.TempDir(), ClientListen: "127.0.0.1:0"})
	u := n.ClientURL()
	if !strings.HasPrefix(u, "nats://127.0.0.1:") || strings.HasSuffix(u, ":0") {
		t.Fatalf("ClientURL() = %q, want nats://127.0.0.1:<port>", u)
	}
	nc, err := nats.Connect(u)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestThreeNodeCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*readyTimeout)
	defer cancel()
	logger, _ := newLogger(t)
	addrs := loopbackAddrs(t, 3)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	cfg := func(i int) natsembed.Config {
		return natsembed.Config{
			Name:          fmt.Sprintf("node-%d", i),
			Dir:           dirs[i],
			ClusterListen: addrs[i],
			Routes:        addrs, // its own address included, as every instance gets the same list
			Logger:        logger,
		}
	}

	began := time.Now()
	nodes := make([]*natsembed.Node, 3)
	for i := range nodes {
		nodes[i] = start(t, cfg(i))
	}
	for i, n := range nodes {
		if got := n.Replicas(); got != 3 {
			t.Errorf("node %d: Replicas() = %d, want 3", i, got)
		}
		if got := n.Name(); got != fmt.Sprintf("node-%d", i) {
			t.Errorf("node %d: Name() = %q", i, got)
		}
	}
	waitAll(t, ctx, nodes...)
	t.Logf("cluster formed in %s", time.Since(began).Round(time.Millisecond))

	js := make([]jetstream.JetStream, 3)
	for i, n := range nodes {
		_, js[i] = connect(t, n)
	}
	stream, err := js[0].CreateStream(ctx, jetstream.StreamConfig{
		Name:     "EVENTS",
		Subjects: []string{"events.>"},
		Replicas: nodes[0].Replicas(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := stream.CachedInfo().Config.Replicas; got != 3 {
		t.Fatalf("stream has %d replicas, want 3", got)
	}
	ack, err := js[1].Publish(ctx, "events.1", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readMsg(ctx, js[2], "EVENTS", ack.Sequence); err != nil || got != "one" {
		t.Fatalf("node 2 read %q, %v; want one", got, err)
	}

	// Stop the stream's leader, the hardest node to lose: the two
	// others must elect another before they accept publishes.
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	down := -1
	for i, n := range nodes {
		if info.Cluster != nil && n.Name() == info.Cluster.Leader {
			down = i
		}
	}
	if down < 0 {
		t.Fatalf("stream leader %+v is none of the nodes", info.Cluster)
	}
	nodes[down].Shutdown()
	up := []int{(down + 1) % 3, (down + 2) % 3}
	stopped := time.Now()

	var seqs []uint64
	for _, i := range up {
		err := retry(ctx, func(ctx context.Context) error {
			ack, err := js[i].Publish(ctx, "events.2", fmt.Appendf(nil, "from node %d", i))
			if err == nil {
				seqs = append(seqs, ack.Sequence)
			}
			return err
		})
		if err != nil {
			t.Fatalf("publish through node %d with node %d down: %v", i, down, err)
		}
	}
	t.Logf("publishes accepted %s after the stream leader stopped", time.Since(stopped).Round(time.Millisecond))
	// A majority is still a ready cluster.
	waitAll(t, ctx, nodes[up[0]], nodes[up[1]])
	for k, seq := range seqs {
		for _, i := range up {
			got, err := readMsg(ctx, js[i], "EVENTS", seq)
			if want := fmt.Sprintf("from node %d", up[k]); err != nil || got != want {
				t.Errorf("node %d read seq %d: %q, %v; want %q", i, seq, got, err, want)
			}
		}
	}

	// The stopped node comes back on its Dir and catches up.
	restarted := time.Now()
	nodes[down] = start(t, cfg(down))
	waitAll(t, ctx, nodes[down])
	t.Logf("restarted node ready in %s", time.Since(restarted).Round(time.Millisecond))
	want := uint64(1 + len(seqs))
	for {
		got, ok := natsembed.LocalStreamMsgs(nodes[down], "EVENTS")
		if ok && got == want {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted node %d holds %d messages (stream found: %v), want %d", down, got, ok, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("restarted node caught up in %s", time.Since(restarted).Round(time.Millisecond))
	_, jsDown := connect(t, nodes[down])
	if got, err := readMsg(ctx, jsDown, "EVENTS", seqs[len(seqs)-1]); err != nil || !strings.HasPrefix(got, "from node") {
		t.Errorf("restarted node read %q, %v", got, err)
	}
}

func TestClusterWithRoutesToTheOthers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	logger, _ := newLogger(t)
	addrs := loopbackAddrs(t, 3)
	nodes := make([]*natsembed.Node, 3)
	for i := range nodes {
		others := slices.Delete(slices.Clone(addrs), i, i+1)
		nodes[i] = start(t, natsembed.Config{Dir: t.TempDir(), ClusterListen: addrs[i], Routes: others, Logger: logger})
		if got := nodes[i].Replicas(); got != 3 {
			t.Errorf("node %d: Replicas() = %d, want 3", i, got)
		}
	}
	waitAll(t, ctx, nodes...)
	// Ready means ready for a stream on all three nodes.
	_, js := connect(t, nodes[2])
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
}

// waitAll waits until every node is ready, all at once.
func waitAll(t *testing.T, ctx context.Context, nodes ...*natsembed.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.WaitReady(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  natsembed.Config
		want string
	}{
		{"no Dir", natsembed.Config{}, "Dir is required"},
		{"routes without listener", natsembed.Config{Dir: "d", Routes: []string{"127.0.0.1:6222"}}, "Routes need a ClusterListen"},
		{"listener without routes", natsembed.Config{Dir: "d", ClusterListen: "127.0.0.1:6222"}, "ClusterListen needs Routes"},
		{"route without port", natsembed.Config{Dir: "d", ClusterListen: "127.0.0.1:6222", Routes: []string{"127.0.0.1"}}, `route "127.0.0.1"`},
		{"route with a scheme", natsembed.Config{Dir: "d", ClusterListen: "127.0.0.1:6222", Routes: []string{"nats-route://a:6222"}}, `route "nats-route://a:6222"`},
		{"bad client port", natsembed.Config{Dir: "d", ClientListen: "127.0.0.1:x"}, "ClientListen"},
		{"bad cluster port", natsembed.Config{Dir: "d", ClusterListen: "127.0.0.1:70000", Routes: []string{"a:1"}}, "ClusterListen"},
		{"spaced name", natsembed.Config{Dir: "d", Name: "a b"}, "white space"},
		{"routes to itself only", natsembed.Config{Dir: "d", ClusterListen: "127.0.0.1:6222", Routes: []string{"127.0.0.1:6222"}}, "only this node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.cfg.Dir != "" {
				tc.cfg.Dir = filepath.Join(t.TempDir(), tc.cfg.Dir)
			}
			n, err := natsembed.Start(tc.cfg)
			if err == nil {
				n.Shutdown()
				t.Fatal("Start accepted the configuration")
			}
			if !errors.Is(err, natsembed.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v; want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestRenamedDirRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := start(t, natsembed.Config{Dir: dir, Name: "first"})
	n.Shutdown()
	_, err := natsembed.Start(natsembed.Config{Dir: dir, Name: "second"})
	if !errors.Is(err, natsembed.ErrConfig) || !strings.Contains(err.Error(), `"first"`) {
		t.Errorf("Start with another name on the same Dir: %v; want ErrConfig naming \"first\"", err)
	}
}

func TestPortTaken(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	began := time.Now()
	_, err = natsembed.Start(natsembed.Config{Dir: t.TempDir(), ClientListen: l.Addr().String()})
	if !errors.Is(err, natsembed.ErrStart) || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Start on a taken port: %v; want ErrStart about listening", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("Start took %s to fail", d)
	}
}

func TestReplicas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		listen string
		routes []string
		want   int
	}{
		{"all three, own included", "127.0.0.1:7001", []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}, 3},
		{"the two others", "127.0.0.1:7001", []string{"127.0.0.1:7002", "127.0.0.1:7003"}, 3},
		{"two nodes", "127.0.0.1:7001", []string{"127.0.0.1:7001", "127.0.0.1:7002"}, 2},
		{"duplicates", "127.0.0.1:7001", []string{"127.0.0.1:7002", "127.0.0.1:7002"}, 2},
		{"wildcard listener, own loopback route", ":7001", []string{"localhost:7001", "127.0.0.1:7002"}, 2},
		{"five nodes", "10.0.0.1:7001", []string{"10.0.0.1:7001", "10.0.0.2:7001", "10.0.0.3:7001", "10.0.0.4:7001", "10.0.0.5:7001"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := natsembed.ReplicasFor(tc.listen, tc.routes); got != tc.want {
				t.Errorf("replicas = %d, want %d", got, tc.want)
			}
		})
	}
}
