// Package natsembed runs a NATS JetStream node inside the application's
// own process, so that a Mercure hub can keep its history in JetStream
// without a NATS server to deploy beside it.
//
// # The embedded mode
//
// [Start] starts a NATS server with JetStream enabled in the calling
// process and returns a [Node]. The application talks to it through
// [Node.Connect], an in-process connection that uses no socket; a client
// port for other processes is opened only when [Config.ClientListen] asks
// for one. The NATS server code is linked only into applications that
// import this module.
//
// # Forming a cluster
//
// Instances of the application become one replicated JetStream cluster
// when each is given a cluster listener ([Config.ClusterListen]) and the
// cluster addresses of the others ([Config.Routes]). The simplest
// configuration is the same list of all the cluster addresses, this
// instance's own included (a route to itself is detected and ignored),
// with a name per instance that stays the same across its restarts (left
// empty, a name is generated and kept in the instance's Dir):
//
//	// instance 1 of 3 (instances 2 and 3 differ only by Name)
//	node, err := natsembed.Start(natsembed.Config{
//		Name:          "hub-1",
//		Dir:           "/var/lib/hub/jetstream",
//		ClusterListen: ":6222",
//		Routes:        []string{"hub-1:6222", "hub-2:6222", "hub-3:6222"},
//	})
//
// The instances may start in any order: each keeps retrying its routes
// until the others answer, and [Node.WaitReady] returns once JetStream
// accepts requests. A new cluster waits for all its instances to elect
// its first leader; later, a majority of them is enough.
//
// # Replicas and availability
//
// [Node.Replicas] tells how many copies a stream should keep: 1 for a
// single node, otherwise 3 (or 2 in a cluster of two). JetStream's
// metadata and every replicated stream are Raft groups, which accept a
// write only when a majority of their members has stored it: a cluster of
// three keeps accepting publishes with one node down, and refuses them
// (until enough nodes come back) with two down. A node that comes back
// with its Dir catches up with what it missed.
//
// The cluster connections are neither authenticated nor encrypted: the
// cluster listener must be reachable only by the instances, on a private
// network.
package natsembed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ErrConfig is wrapped by the errors [Start] returns for an invalid
// [Config].
var ErrConfig = errors.New("natsembed: invalid configuration")

// ErrStart is wrapped by the errors [Start] returns when the NATS server
// could not start, for example because a port is taken or the data
// directory cannot be used.
var ErrStart = errors.New("natsembed: NATS server did not start")

// ErrStopped is wrapped by the errors of a [Node]'s methods called after
// its [Node.Shutdown].
var ErrStopped = errors.New("natsembed: node is shut down")

// LevelTrace is the [slog.Level] of the NATS server's trace lines, one per
// protocol message: they are produced only when [Config.Logger] is
// enabled at this level.
const LevelTrace = slog.LevelDebug - 4

// DefaultClusterName is the cluster name used when [Config.ClusterName] is
// empty.
const DefaultClusterName = "mercure"

// startTimeout bounds the wait for the server's listeners in Start.
const startTimeout = 10 * time.Second

// pollInterval is how often Start and WaitReady look at the server's
// state.
const pollInterval = 25 * time.Millisecond

// nameFile is the file in Config.Dir that keeps the node's name.
const nameFile = "natsembed-name"

// Config configures the node that [Start] runs.
type Config struct {
	// Dir is the directory of the node's JetStream data (required). It is
	// created if needed. A node restarted on the same Dir finds its streams
	// again, and in a cluster catches up with what it missed.
	Dir string

	// Name is the server's name, unique in the cluster and the same across
	// the node's restarts: JetStream knows its peers by name. When empty, a
	// name is generated on the first start and kept in Dir. A Dir keeps
	// the name it was first used with: Start refuses another one.
	Name string

	// ClientListen is the host:port of a listener for NATS clients in
	// other processes; port 0 picks a free port (see [Node.ClientURL]).
	// When empty, the node is meant to be reached only through
	// [Node.Connect]: a single node then opens no client port, while a
	// clustered node listens on a free loopback port that it does not
	// report, because the NATS server starts its routes only after its
	// client listener.
	ClientListen string

	// ClusterListen is the host:port of the listener for the connections
	// between the cluster's nodes, such as ":6222". Empty for a single
	// node; otherwise Routes must not be empty.
	ClusterListen string

	// Routes are the host:port cluster addresses of the other instances.
	// They may include this node's own address, which makes the same list
	// usable by every instance. Empty for a single node.
	Routes []string

	// ClusterName is the name of the cluster, the same for all its nodes;
	// [DefaultClusterName] when empty. A node refuses routes to a cluster
	// of another name.
	ClusterName string

	// Logger receives the NATS server's log lines: notices at
	// [slog.LevelInfo], warnings at [slog.LevelWarn], errors and fatal
	// errors at [slog.LevelError], debug lines at [slog.LevelDebug] and
	// trace lines at [LevelTrace], each with the attribute nats_server
	// set to the node's name. Nil discards them.
	Logger *slog.Logger
}

// Node is a running embedded NATS server with JetStream enabled. Its
// methods are safe for concurrent use.
type Node struct {
	server    *server.Server
	log       *logAdapter
	name      string
	clientURL string
	clustered bool
	replicas  int
	stopOnce  sync.Once
}

// Start starts a node as cfg describes and returns once it accepts
// connections. In a cluster, JetStream may not accept requests yet: see
// [Node.WaitReady]. Errors wrap [ErrConfig] or [ErrStart].
func Start(cfg Config) (*Node, error) {
	p, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: data directory: %v", ErrStart, err)
	}
	name, err := nodeName(cfg.Dir, cfg.Name)
	if err != nil {
		return nil, err
	}

	opts := &server.Options{
		ServerName: name,
		JetStream:  true,
		StoreDir:   cfg.Dir,
		// The application owns the process's signals.
		NoSigs: true,
	}
	switch {
	case p.clientPort != 0:
		opts.Host, opts.Port = p.clientHost, p.clientPort
	case p.clustered:
		// With DontListen, the server never starts its routes.
		opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	default:
		opts.DontListen = true
	}
	if p.clustered {
		opts.Cluster = server.ClusterOpts{
			Name: p.clusterName,
			Host: p.clusterHost,
			Port: p.clusterPort,
		}
		opts.Routes = p.routes
	}

	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	adapter := newLogAdapter(cfg.Logger, name)
	ctx := context.Background()
	s.SetLoggerV2(adapter, adapter.handler.Enabled(ctx, slog.LevelDebug),
		adapter.handler.Enabled(ctx, LevelTrace), false)
	s.Start()

	n := &Node{
		server:    s,
		log:       adapter,
		name:      name,
		clustered: p.clustered,
		replicas:  p.replicas,
	}
	if err := n.waitStarted(); err != nil {
		n.Shutdown()
		return nil, err
	}
	if p.clientPort != 0 {
		if addr := s.Addr(); addr != nil {
			n.clientURL = (&url.URL{Scheme: "nats", Host: addr.String()}).String()
		}
	}
	return n, nil
}

// waitStarted waits until the server's listeners are open, or reports
// what stopped it.
func (n *Node) waitStarted() error {
	deadline := time.Now().Add(startTimeout)
	for {
		if msg := n.log.fatal(); msg != "" {
			return fmt.Errorf("%w: %s", ErrStart, msg)
		}
		// ReadyForConnections sleeps between its checks only when given
		// more than 25ms.
		if n.server.ReadyForConnections(2 * pollInterval) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: listeners not open after %s", ErrStart, startTimeout)
		}
	}
	if msg := n.log.fatal(); msg != "" {
		return fmt.Errorf("%w: %s", ErrStart, msg)
	}
	if !n.server.JetStreamEnabled() {
		return fmt.Errorf("%w: JetStream is not enabled", ErrStart)
	}
	return nil
}

// Name returns the node's server name: [Config.Name], or the name
// generated on its first start.
func (n *Node) Name() string {
	return n.name
}

// Connect returns a connection to the node that goes through no socket.
// It reconnects forever (while the node runs; it cannot reach a node
// restarted by another Start): opts, applied after these defaults, may
// change that. Close it before [Node.Shutdown], or it keeps retrying.
func (n *Node) Connect(opts ...nats.Option) (*nats.Conn, error) {
	if !n.server.Running() {
		return nil, ErrStopped
	}
	all := append([]nats.Option{
		nats.InProcessServer(n.server),
		nats.MaxReconnects(-1),
	}, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		return nil, fmt.Errorf("natsembed: connect to node %s: %w", n.name, err)
	}
	return nc, nil
}

// ClientURL returns the nats:// URL of the node's client listener, or ""
// when [Config.ClientListen] was empty.
func (n *Node) ClientURL() string {
	return n.clientURL
}

// Replicas returns the number of replicas the application's streams
// should have: 1 for a single node, else the number of distinct nodes
// that [Config.ClusterListen] and [Config.Routes] name, at most 3. A
// route is taken for this node's own when it names this node's cluster
// port on the host of ClusterListen or, when that host is a wildcard
// (":6222"), on localhost or one of the machine's IP addresses. Any
// other route, such as this node's own host name, counts as another
// node.
func (n *Node) Replicas() int {
	return n.replicas
}

// WaitReady waits until JetStream accepts requests on this node, and
// returns an error wrapping ctx's error, with the reason the node is not
// ready yet, when ctx ends first. A single node is ready once started. A
// clustered node is ready when a JetStream metadata leader is elected,
// this node is up to date with it and with the streams it replicates, and
// the cluster counts at least [Node.Replicas] members, so that streams of
// that many replicas can be created. A new cluster is ready once all its
// instances have joined it; after that, a majority of them is enough.
func (n *Node) WaitReady(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		reason := n.notReady()
		if reason == nil {
			return nil
		}
		if errors.Is(reason, ErrStopped) {
			return reason
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsembed: node %s not ready (%v): %w", n.name, reason, ctx.Err())
		case <-t.C:
		}
	}
}

// notReady returns why JetStream does not accept requests on the node
// yet, or nil.
func (n *Node) notReady() error {
	if !n.server.Running() {
		return ErrStopped
	}
	if n.clustered {
		// Checked first: until there is a leader, the health check logs
		// a debug line at each call.
		info, err := n.server.Jsz(nil)
		if err != nil {
			return err
		}
		if info.Meta == nil || info.Meta.Leader == "" {
			return errors.New("no JetStream metadata leader yet")
		}
		// Meta.Replicas lists the members other than the leader, the
		// offline ones included.
		if members := len(info.Meta.Replicas) + 1; members < n.replicas {
			return fmt.Errorf("the JetStream cluster has %d of at least %d members", members, n.replicas)
		}
	}
	h := n.server.Healthz(nil)
	if h.Error != "" {
		return errors.New(h.Error)
	}
	if h.StatusCode != http.StatusOK {
		return fmt.Errorf("health status %d %q", h.StatusCode, h.Status)
	}
	return nil
}

// Shutdown stops the node and waits until it has stopped. Connections
// from [Node.Connect] stop working. Calling it again does nothing.
func (n *Node) Shutdown() {
	n.stopOnce.Do(func() {
		n.server.Shutdown()
		n.server.WaitForShutdown()
	})
}

// parsed is a validated Config.
type parsed struct {
	clientHost  string
	clientPort  int // 0: none
	clustered   bool
	clusterName string
	clusterHost string
	clusterPort int
	routes      []*url.URL
	replicas    int
}

func parseConfig(cfg Config) (parsed, error) {
	var p parsed
	if cfg.Dir == "" {
		return p, fmt.Errorf("%w: Dir is required (the JetStream data directory)", ErrConfig)
	}
	if strings.ContainsAny(cfg.Name, " \t\r\n") {
		return p, fmt.Errorf("%w: Name %q contains white space", ErrConfig, cfg.Name)
	}
	if cfg.ClientListen != "" {
		host, port, err := parseListen(cfg.ClientListen)
		if err != nil {
			return p, fmt.Errorf("%w: ClientListen: %v", ErrConfig, err)
		}
		p.clientHost, p.clientPort = host, port
	}
	p.replicas = 1
	if cfg.ClusterListen == "" {
		if len(cfg.Routes) > 0 {
			return p, fmt.Errorf("%w: Routes need a ClusterListen address", ErrConfig)
		}
		return p, nil
	}
	if len(cfg.Routes) == 0 {
		return p, fmt.Errorf("%w: ClusterListen needs Routes (a JetStream cluster needs the other instances' addresses)", ErrConfig)
	}
	host, port, err := parseListen(cfg.ClusterListen)
	if err != nil {
		return p, fmt.Errorf("%w: ClusterListen: %v", ErrConfig, err)
	}
	p.clustered = true
	p.clusterHost, p.clusterPort = host, port
	p.clusterName = cfg.ClusterName
	if p.clusterName == "" {
		p.clusterName = DefaultClusterName
	}
	if strings.ContainsAny(p.clusterName, " \t\r\n") {
		return p, fmt.Errorf("%w: ClusterName %q contains white space", ErrConfig, p.clusterName)
	}

	seen := make(map[string]bool)
	others := 0
	var local map[string]bool
	for _, r := range cfg.Routes {
		rhost, rport, err := net.SplitHostPort(r)
		if err != nil {
			return p, fmt.Errorf("%w: route %q: %v", ErrConfig, r, err)
		}
		portNum, err := strconv.Atoi(rport)
		if err != nil || portNum < 1 || portNum > 65535 || rhost == "" {
			return p, fmt.Errorf("%w: route %q is not a host:port address", ErrConfig, r)
		}
		key := net.JoinHostPort(strings.ToLower(rhost), rport)
		if seen[key] {
			continue
		}
		seen[key] = true
		p.routes = append(p.routes, &url.URL{Scheme: "nats-route", Host: key})
		if portNum == port {
			if local == nil {
				local = localHosts(host)
			}
			if local[strings.ToLower(rhost)] {
				continue
			}
		}
		others++
	}
	if others == 0 {
		return p, fmt.Errorf("%w: Routes name only this node, which alone never elects a JetStream leader (leave ClusterListen and Routes empty for a single node)", ErrConfig)
	}
	p.replicas = min(3, others+1)
	return p, nil
}

// parseListen parses a host:port listen address into the server's
// options, where port 0 means the default port and RANDOM_PORT a free one.
func parseListen(addr string) (host string, port int, err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err = strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// localHosts returns the hosts by which a route may name a node that
// listens on host: host itself and, when it is a wildcard, the loopback
// names and the machine's interface addresses.
func localHosts(host string) map[string]bool {
	hosts := map[string]bool{strings.ToLower(host): true}
	ip := net.ParseIP(host)
	if host != "" && (ip == nil || !ip.IsUnspecified()) {
		return hosts
	}
	hosts["localhost"] = true
	hosts["127.0.0.1"] = true
	hosts["::1"] = true
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipNet, ok := a.(*net.IPNet); ok {
				hosts[ipNet.IP.String()] = true
			}
		}
	}
	return hosts
}

// nodeName returns the node's name: the configured one or the one kept in
// dir, generating and keeping one on the first start.
func nodeName(dir, configured string) (string, error) {
	path := filepath.Join(dir, nameFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		kept := strings.TrimSpace(string(data))
		if configured != "" && kept != configured {
			return "", fmt.Errorf("%w: Dir %s holds the data of node %q, not %q (a node keeps its name; remove %s to rename it)",
				ErrConfig, dir, kept, configured, path)
		}
		if kept != "" {
			return kept, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: %v", ErrStart, err)
	}
	name := configured
	if name == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		name = DefaultClusterName + "-" + hex.EncodeToString(b[:])
	}
	if err := os.WriteFile(path, []byte(name+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("%w: %v", ErrStart, err)
	}
	return name, nil
}

// logAdapter maps the NATS server's Logger interface onto a slog handler
// and keeps the first fatal error, which the server reports instead of
// returning it.
type logAdapter struct {
	handler slog.Handler

	mu        sync.Mutex
	fatalLine string
}

func newLogAdapter(l *slog.Logger, name string) *logAdapter {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &logAdapter{handler: l.Handler().WithAttrs([]slog.Attr{slog.String("nats_server", name)})}
}

func (a *logAdapter) fatal() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fatalLine
}

func (a *logAdapter) emit(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if !a.handler.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, fmt.Sprintf(format, v...), 0)
	_ = a.handler.Handle(ctx, r)
}

// Noticef logs at slog.LevelInfo.
func (a *logAdapter) Noticef(format string, v ...any) { a.emit(slog.LevelInfo, format, v) }

// Warnf logs at slog.LevelWarn.
func (a *logAdapter) Warnf(format string, v ...any) { a.emit(slog.LevelWarn, format, v) }

// Errorf logs at slog.LevelError.
func (a *logAdapter) Errorf(format string, v ...any) { a.emit(slog.LevelError, format, v) }

// Fatalf logs at slog.LevelError and keeps the line for Start: unlike the
// NATS server's own logger, it does not exit the process.
func (a *logAdapter) Fatalf(format string, v ...any) {
	a.mu.Lock()
	if a.fatalLine == "" {
		a.fatalLine = fmt.Sprintf(format, v...)
	}
	a.mu.Unlock()
	a.emit(slog.LevelError, format, v)
}

// Debugf logs at slog.LevelDebug.
func (a *logAdapter) Debugf(format string, v ...any) { a.emit(slog.LevelDebug, format, v) }

// Tracef logs at LevelTrace.
func (a *logAdapter) Tracef(format string, v ...any) { a.emit(LevelTrace, format, v) }
