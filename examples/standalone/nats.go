package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mercurekit/mercure/natsembed"
	"github.com/mercurekit/mercure/natsstore"
)

// natsStream is the default name of the JetStream stream of -store
// nats://, and the name of the embedded node's.
const natsStream = "mercure"

// defaultNATSPort is the port of a NATS URL's host given without one, as
// nats.go has it.
const defaultNATSPort = "4222"

// natsParams are the query parameters of a NATS URL of -store.
var natsParams = []string{"stream", "replicas", "creds", "nkey", "tls_ca", "tls_cert", "tls_key"}

// isNATSURL reports whether spec is a NATS URL of -store: nats://, or
// tls:// for TLS (nats.go's schemes).
func isNATSURL(spec string) bool {
	return strings.HasPrefix(spec, "nats://") || strings.HasPrefix(spec, "tls://")
}

// natsURL is a NATS URL of -store, taken apart.
type natsURL struct {
	tls     bool     // tls://: every connection with TLS
	servers []string // HOST:PORT, the port given or NATS's own
	// user and password, or token (user information without a
	// password), authenticate to every server, including those the
	// cluster tells the client of.
	user, password, token string
	stream                string
	replicas              int // 0: natsstore's default
	// creds is a credentials file (a user JWT and its nkey seed), nkey
	// an nkey seed file.
	creds, nkey string
	// tlsCA verifies the servers' certificates instead of the system's
	// roots; tlsCert and tlsKey are a client certificate.
	tlsCA, tlsCert, tlsKey string
	// shown is the URL for error messages, its password or token hidden.
	shown string
}

// parseNATSURL takes a NATS URL of -store apart (see the package
// documentation). As parseRedisURL, it parses the list of addresses
// itself: net/url takes a host list for one host.
func parseNATSURL(spec string) (natsURL, error) {
	scheme, rest, _ := strings.Cut(spec, "://")
	rest, err := joinNATSURLs(scheme, rest)
	if err != nil {
		return natsURL{}, fmt.Errorf("-store: %v", err)
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hosts := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hosts = authority[:i], authority[i+1:]
	}
	u, err := url.Parse("nats://host" + tail)
	if err != nil {
		return natsURL{}, fmt.Errorf("-store: invalid %s URL", scheme)
	}
	q := u.Query()
	n := natsURL{tls: scheme == "tls", stream: natsStream}
	n.shown = redactNATS(scheme, userinfo, hosts, tail)
	bad := func(format string, a ...any) (natsURL, error) {
		return natsURL{}, fmt.Errorf("-store %s: %s", n.shown, fmt.Sprintf(format, a...))
	}

	if userinfo != "" {
		ui, err := url.Parse("nats://" + userinfo + "@host")
		if err != nil || ui.User == nil {
			return bad("invalid user information: want USER:PASSWORD@ or TOKEN@, percent-encoded")
		}
		pass, hasPass := ui.User.Password()
		switch {
		case ui.User.Username() == "":
			return bad("user information without a user or token")
		case hasPass:
			n.user, n.password = ui.User.Username(), pass
		default:
			n.token = ui.User.Username()
		}
	}
	if p := u.Path; p != "" && p != "/" {
		return bad("path %s: a NATS URL names no database (the stream is ?stream=NAME)", p)
	}
	if u.Fragment != "" {
		return bad("a fragment (#%s) means nothing here", u.Fragment)
	}
	if hosts == "" {
		return bad("no address: want %s://HOST:PORT[,HOST:PORT...]", scheme)
	}
	for a := range strings.SplitSeq(hosts, ",") {
		addr, err := natsAddr(a)
		if err != nil {
			return bad("address %q: %v", a, err)
		}
		n.servers = append(n.servers, addr)
	}

	for k := range q {
		if !slices.Contains(natsParams, k) {
			return bad("unknown parameter %s: want %s", k, strings.Join(natsParams, ", "))
		}
	}
	if s := q.Get("stream"); q.Has("stream") {
		if !validStreamName(s) {
			return bad("stream=%q: want a stream name of letters, digits, - and _", s)
		}
		n.stream = s
	}
	if q.Has("replicas") {
		r, err := strconv.Atoi(q.Get("replicas"))
		if err != nil || r < 1 || r > 5 {
			return bad("replicas=%q: want the number of servers that keep the stream, 1 to 5 (an update is acknowledged once a majority of them has it)", q.Get("replicas"))
		}
		n.replicas = r
	}
	n.creds, n.nkey = q.Get("creds"), q.Get("nkey")
	n.tlsCA, n.tlsCert, n.tlsKey = q.Get("tls_ca"), q.Get("tls_cert"), q.Get("tls_key")
	switch {
	case n.creds != "" && n.nkey != "":
		return bad("creds= and nkey= are two ways to authenticate: want one")
	case userinfo != "" && (n.creds != "" || n.nkey != ""):
		return bad("user information and creds= or nkey= are two ways to authenticate: want one")
	case (n.tlsCert == "") != (n.tlsKey == ""):
		return bad("tls_cert= and tls_key= go together: a client certificate and its key")
	}
	return n, nil
}

// joinNATSURLs turns the rest of nats.go's list of URLs, after its first
// scheme (nats://A,nats://B, each maybe with the same user information),
// into that of one URL (nats://A,B), which parseNATSURL takes apart.
func joinNATSURLs(scheme, rest string) (string, error) {
	if !strings.Contains(rest, "://") {
		return rest, nil
	}
	parts := strings.Split(rest, ",")
	userinfo := ""
	if i := strings.LastIndexByte(parts[0], '@'); i >= 0 {
		userinfo = parts[0][:i]
	}
	for i, p := range parts[1:] {
		s, r, ok := strings.Cut(p, "://")
		if !ok {
			continue
		}
		if s != scheme {
			return "", fmt.Errorf("%s:// and %s:// in one list: want one scheme (tls:// makes every connection TLS)", scheme, s)
		}
		if j := strings.LastIndexByte(r, '@'); j >= 0 {
			if r[:j] != userinfo {
				return "", errors.New("the URLs of the list have different user information: want the same for every server")
			}
			r = r[j+1:]
		}
		parts[i+1] = r
	}
	return strings.Join(parts, ","), nil
}

// natsAddr returns a's HOST:PORT, with NATS's own port when a has none.
func natsAddr(a string) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		bare := strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		if a == "" || strings.Contains(a, ":") && !(strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]")) {
			return "", errors.New("want HOST:PORT")
		}
		host, port = bare, defaultNATSPort
	}
	if p, err := strconv.Atoi(port); host == "" || err != nil || p < 1 || p > 65535 {
		return "", errors.New("want HOST:PORT")
	}
	return net.JoinHostPort(host, port), nil
}

// validStreamName reports whether s can name a JetStream stream of
// natsstore (see natsstore.New).
func validStreamName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// redactNATS returns a NATS URL of -store with its password or token
// hidden.
func redactNATS(scheme, userinfo, hosts, tail string) string {
	switch user, _, ok := strings.Cut(userinfo, ":"); {
	case ok:
		userinfo = user + ":xxxxx@"
	case userinfo != "":
		userinfo = "xxxxx@"
	}
	return scheme + "://" + userinfo + hosts + tail
}

// urls returns the servers' URLs for nats.Connect, without credentials:
// nats.go uses a URL's own only to connect to that server.
func (n natsURL) urls() string {
	scheme := "nats"
	if n.tls {
		scheme = "tls"
	}
	u := make([]string, len(n.servers))
	for i, s := range n.servers {
		u[i] = scheme + "://" + s
	}
	return strings.Join(u, ",")
}

// options returns the connection's options.
func (n natsURL) options() ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("mercure hub"),
		// The store's appends and feed ride on the connection: it must
		// come back, to any server of the cluster, however long the
		// servers are away. The store bounds each of its calls.
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
	}
	switch {
	case n.user != "":
		opts = append(opts, nats.UserInfo(n.user, n.password))
	case n.token != "":
		opts = append(opts, nats.Token(n.token))
	case n.creds != "":
		opts = append(opts, nats.UserCredentials(n.creds))
	case n.nkey != "":
		o, err := nats.NkeyOptionFromSeed(n.nkey)
		if err != nil {
			return nil, fmt.Errorf("nkey=%s: %w", n.nkey, err)
		}
		opts = append(opts, o)
	}
	// Each asks for TLS, as tls:// does.
	if n.tlsCA != "" {
		opts = append(opts, nats.RootCAs(n.tlsCA))
	}
	if n.tlsCert != "" {
		opts = append(opts, nats.ClientCert(n.tlsCert, n.tlsKey))
	}
	return opts, nil
}

// openNATS opens a store on the JetStream stream of a NATS URL of -store,
// keeping at most maxLen events. The returned func closes the store, then
// the connection.
func openNATS(spec string, maxLen int64) (*natsstore.Store, func() error, error) {
	n, err := parseNATSURL(spec)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*natsstore.Store, func() error, error) {
		return nil, nil, fmt.Errorf("-store %s: %w", n.shown, err)
	}
	opts, err := n.options()
	if err != nil {
		return fail(err)
	}
	// Connect fails when no server answers: a hub does not start
	// without its history.
	nc, err := nats.Connect(n.urls(), opts...)
	if err != nil {
		return fail(err)
	}
	storeOpts := []natsstore.Option{natsstore.WithMaxLen(maxLen)}
	if n.replicas > 0 {
		storeOpts = append(storeOpts, natsstore.WithReplicas(n.replicas))
	}
	st, err := natsstore.New(nc, n.stream, storeOpts...)
	if err != nil {
		nc.Close()
		return fail(err)
	}
	return st, func() error {
		err := st.Close()
		nc.Close()
		return err
	}, nil
}

// natsEmbed is the flags of the embedded NATS node (-nats-embed and the
// others -nats- flags).
type natsEmbed struct {
	dir      string
	cluster  string   // this node's cluster address, "" for a single node
	routes   []string // the cluster addresses of every node
	listen   string   // the client listener, "" for none
	replicas int      // 0: the node's Replicas
	wait     time.Duration
}

// natsEmbedFlags are the flags that configure the embedded node, which
// mean nothing without -nats-embed.
var natsEmbedFlags = []string{"nats-cluster", "nats-routes", "nats-listen", "nats-replicas", "nats-wait"}

// checkNATSEmbed validates the -nats- flags, given telling which the
// command line set, and returns them taken apart.
func checkNATSEmbed(given map[string]bool, dir, cluster, routes, listen string, replicas int, wait time.Duration) (natsEmbed, error) {
	e := natsEmbed{dir: dir, cluster: cluster, listen: listen, replicas: replicas, wait: wait}
	if dir == "" {
		if given["nats-embed"] {
			return e, errors.New("-nats-embed needs a directory: the embedded NATS node keeps its data there")
		}
		for _, f := range natsEmbedFlags {
			if given[f] {
				return e, fmt.Errorf("-%s needs -nats-embed DIR: it configures the embedded NATS node", f)
			}
		}
		return e, nil
	}
	switch {
	case given["store"]:
		return e, errors.New("-store and -nats-embed both name the hub's store (the embedded NATS node is one): give one of them")
	case cluster != "" && routes == "":
		return e, errors.New("-nats-cluster needs -nats-routes: the cluster addresses of the other nodes (a node alone never elects a leader)")
	case cluster == "" && routes != "":
		return e, errors.New("-nats-routes needs -nats-cluster: this node's own cluster address, where the others reach it")
	case wait <= 0:
		return e, fmt.Errorf("-nats-wait %v: want a positive duration", wait)
	}
	if cluster != "" {
		if err := checkHostPort(cluster, true); err != nil {
			return e, fmt.Errorf("-nats-cluster %q: %v", cluster, err)
		}
		seen := map[string]bool{}
		for r := range strings.SplitSeq(routes, ",") {
			if err := checkHostPort(r, false); err != nil {
				return e, fmt.Errorf("-nats-routes: %q: %v", r, err)
			}
			if !seen[r] {
				seen[r] = true
				e.routes = append(e.routes, r)
			}
		}
		if len(e.routes) == 1 && e.routes[0] == cluster {
			return e, fmt.Errorf("-nats-routes names only this node (-nats-cluster %s): give the other nodes' cluster addresses", cluster)
		}
	}
	if listen != "" {
		if _, port, err := net.SplitHostPort(listen); err != nil || checkPort(port, true) != nil {
			return e, fmt.Errorf("-nats-listen %q: want HOST:PORT (port 0: any free port)", listen)
		}
	}
	if given["nats-replicas"] {
		// At most: a route may name this node.
		nodes := len(e.routes)
		if !slices.Contains(e.routes, cluster) {
			nodes++
		}
		switch {
		case replicas < 1 || replicas > 5:
			return e, fmt.Errorf("-nats-replicas %d: want 1 to 5, the nodes that keep each update", replicas)
		case replicas > 1 && cluster == "":
			return e, fmt.Errorf("-nats-replicas %d needs -nats-cluster and -nats-routes: a single node keeps one copy", replicas)
		case replicas > nodes:
			return e, fmt.Errorf("-nats-replicas %d: -nats-cluster and -nats-routes name %d nodes", replicas, nodes)
		}
	}
	return e, nil
}

// checkHostPort checks a HOST:PORT address; anyHost allows an empty
// host (every interface), for a listener.
func checkHostPort(addr string, anyHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || (host == "" && !anyHost) {
		return errors.New("want HOST:PORT")
	}
	return checkPort(port, false)
}

// checkPort checks a port number; zero allows 0 (any free port).
func checkPort(port string, zero bool) error {
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || (p == 0 && !zero) {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// openEmbedded starts the embedded NATS node, waits until its JetStream
// cluster is ready (ctx ends the wait early: a signal), and opens a store
// on its stream, keeping at most maxLen events. The returned func closes
// the store, then the connection, then shuts the node down: the node
// outlives the hub.
func openEmbedded(ctx context.Context, e natsEmbed, maxLen int64, log *slog.Logger) (*natsstore.Store, func() error, error) {
	node, err := natsembed.Start(natsembed.Config{Dir: e.dir, ClientListen: e.listen, ClusterListen: e.cluster,
		Routes: e.routes, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("-nats-embed %s: %w", e.dir, err)
	}
	fail := func(err error) (*natsstore.Store, func() error, error) {
		node.Shutdown()
		return nil, nil, fmt.Errorf("-nats-embed %s: %w", e.dir, err)
	}
	replicas := e.replicas
	if replicas == 0 {
		replicas = node.Replicas()
	}
	log.Info("embedded NATS node started", "name", node.Name(), "dir", e.dir, "cluster", e.cluster,
		"client_url", node.ClientURL(), "replicas", replicas)
	wctx, cancel := context.WithTimeout(ctx, e.wait)
	defer cancel()
	if err := node.WaitReady(wctx); err != nil {
		if ctx.Err() != nil {
			return fail(err) // a signal
		}
		return fail(fmt.Errorf("%w (-nats-wait %v: a new cluster waits for every node of -nats-routes, a running one for a majority)", err, e.wait))
	}
	nc, err := node.Connect()
	if err != nil {
		return fail(err)
	}
	// The stream's first creation, on a cluster that has just elected its
	// leader, may take longer than a call's timeout on a loaded machine:
	// tried again within -nats-wait.
	var st *natsstore.Store
	for {
		st, err = natsstore.New(nc, natsStream, natsstore.WithMaxLen(maxLen), natsstore.WithReplicas(replicas))
		if err == nil {
			break
		}
		log.Info("the embedded node's stream is not ready yet", "reason", err)
		select {
		case <-wctx.Done():
		case <-time.After(250 * time.Millisecond):
			continue
		}
		break
	}
	if err != nil {
		nc.Close()
		return fail(err)
	}
	return st, func() error {
		err := st.Close()
		nc.Close()
		node.Shutdown()
		return err
	}, nil
}
