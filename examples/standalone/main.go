// Command standalone runs a Mercure hub as its own server: the library's
// hub configured from flags, with a page to try it, metrics and health
// endpoints, and a graceful shutdown. Its flags follow the launch contract
// that black-box tools (load generators, protocol checkers) rely on.
//
//	go run ./examples/standalone -addr localhost:3000 -insecure-publish
//
// Open http://localhost:3000/, subscribe to a topic, then publish:
//
//	curl -d topic=https://example.com/books/1 -d data=hello http://localhost:3000/.well-known/mercure
//
// With -tls-cert FILE and -tls-key FILE (PEM), -addr serves TLS:
// browsers get HTTP/2, other clients HTTP/1.1, chosen by ALPN, and the
// default hub URL is https. SIGHUP reads the pair again, so a renewed
// certificate is served without ending the streams.
//
// The -store flag picks where the history lives: memory (the default),
// bolt:PATH (a durable file), or a Redis stream that every hub started
// with the same URL shares, so that they act as one hub:
//
//   - redis://[USER:PASS@]HOST:PORT/DB, one Redis server;
//   - redis-sentinel://[USER:PASS@]HOST:PORT[,HOST:PORT...]/DB?master=NAME,
//     the primary that the sentinels at those addresses know as NAME,
//     followed through a failover; USER:PASS authenticate to the
//     sentinels, the query parameters username and password to the
//     primary and its replicas (as go-redis's ParseFailoverURL has it);
//   - redis-cluster://[USER:PASS@]HOST:PORT[,HOST:PORT...], a Redis
//     Cluster that those nodes belong to.
//
// rediss://, rediss-sentinel:// and rediss-cluster:// connect with TLS,
// checking every server's certificate against the first host's name, as
// go-redis's parsers do (skip_verify=true skips the check, except in a
// cluster). The query parameter stream names the stream key: mercure by
// default, {mercure} in a cluster, where the key needs a hash tag so
// that every key of the store lies in one slot. replicas=N acknowledges
// an update only once N replicas have it, so that a failover loses no
// acknowledged update (redisstore.WithReplicas). The other query
// parameters are go-redis options (dial_timeout=3s, say).
// postgres://USER[:PASS]@HOST:PORT/DB (or postgresql://) keeps the history
// in PostgreSQL tables that every hub started with the same URL shares;
// the query parameter prefix names the tables (default mercure), the
// others are pgx connection parameters (sslmode=disable, say). With a
// primary and standbys, name them all, HOST:PORT,HOST:PORT, with
// target_session_attrs=read-write: the hub follows a promoted standby.
//
// nats://[USER:PASS@]HOST:PORT[,HOST:PORT...] keeps the history in a
// JetStream stream of an existing NATS cluster (or server) that every
// hub started with the same URL shares (nats-server 2.11 or later, with
// JetStream enabled). tls:// connects with TLS, checking the servers'
// certificates against the system's roots or tls_ca=FILE; tls_cert=FILE
// and tls_key=FILE add a client certificate. USER:PASS@ (or TOKEN@)
// authenticate to every server of the cluster, creds=FILE with a
// credentials file (a user JWT and its seed), nkey=FILE with an nkey
// seed. stream=NAME names the stream (mercure by default); replicas=N
// keeps it on N servers (3 on a cluster of three; without it, an
// existing stream keeps its own and a new one gets 1), an
// update being acknowledged once a majority of them has it, so that a
// server's death loses nothing acknowledged. -history bounds it.
//
// -nats-embed DIR needs no server at all: the hub runs a NATS node with
// JetStream inside its own process, its data in DIR, and keeps the
// history there. Three hubs, each with -nats-embed, -nats-cluster
// HOST:PORT (its node's address for the others) and -nats-routes
// HOST:PORT,HOST:PORT,HOST:PORT (the three nodes' addresses, its own
// included), are a replicated cluster: each update is kept by the three,
// acknowledged once two have it, and the cluster goes on while any two
// run (docs/clusters.md). -nats-listen HOST:PORT opens a client port for
// NATS tools; -nats-replicas N overrides the copies kept (3 with routes,
// else 1). The cluster port is neither authenticated nor encrypted: keep
// it on a private network.
//
// -debugger serves the hub's debugger page at the hub path followed by
// /debug/ (http://localhost:3000/.well-known/mercure/debug/): subscribe,
// publish, who is connected and the hub's activity, with the viewer's
// token. -playground adds a self-serve token for everything: local
// development only.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/boltstore"
	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/promhub"
	"github.com/mercurekit/mercure/redisstore"
	"github.com/redis/go-redis/v9"
)

//go:embed index.html
var indexHTML string

var page = template.Must(template.New("index").Parse(indexHTML))

// logLevel is the level of main's logger, which -log-level sets.
var logLevel = new(slog.LevelVar)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
	if err := run(os.Args[1:], log); err != nil {
		fmt.Fprintln(os.Stderr, "standalone:", err)
		os.Exit(1)
	}
}

// server is the configured hub and the handler serving it and the page.
type server struct {
	addr string
	// cert is -tls-cert and -tls-key; nil serves plain HTTP.
	cert       *certificate
	hub        *mercure.Hub
	handler    http.Handler
	cpuProfile string
	closeStore func() error // nil for the in-memory store
	// closeTraces flushes and closes the -traces file; nil without one.
	closeTraces func(context.Context) error
	// metricsAddr is -metrics-addr, where metrics serves /metrics,
	// /healthz and /readyz; metricsLn is its listener, once open.
	metricsAddr string
	metrics     http.Handler
	metricsLn   net.Listener
	// idleTimeout closes keep-alive connections idle that long;
	// shutdownTimeout is how long a shutdown waits for requests in flight;
	// headerTimeout bounds a request's headers, and a TLS handshake.
	idleTimeout, shutdownTimeout, headerTimeout time.Duration
}

// configure parses the flags of the launch contract into a server.
func configure(args []string, log *slog.Logger) (*server, error) {
	return configureContext(context.Background(), args, log)
}

// configureContext is configure, its waits for the store (the embedded
// NATS cluster's) ended early when ctx ends: a signal.
func configureContext(ctx context.Context, args []string, log *slog.Logger) (*server, error) {
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	var (
		addr             = fs.String("addr", "localhost:3000", "listen address (plain HTTP, or TLS with -tls-cert)")
		tlsCert          = fs.String("tls-cert", "", "serve -addr over TLS, HTTP/2 and HTTP/1.1 by ALPN, with this certificate chain (PEM); read again on SIGHUP")
		tlsKey           = fs.String("tls-key", "", "the private key (PEM) of -tls-cert")
		hubURL           = fs.String("hub-url", "", "public hub URL (default http://ADDR/.well-known/mercure)")
		history          = fs.Int("history", memstore.DefaultMaxEvents, "number of past updates kept for reconnecting subscribers")
		storeSpec        = fs.String("store", "memory", "history store: memory, bolt:PATH for a durable file, or shared by hubs: redis://HOST:PORT/DB, redis-sentinel://HOST:PORT[,HOST:PORT...]/DB?master=NAME or redis-cluster://HOST:PORT[,HOST:PORT...] (rediss... for TLS; stream=KEY names the stream, replicas=N waits for N replicas), postgres://USER@HOST:PORT[,HOST:PORT...]/DB[?prefix=NAME][&target_session_attrs=read-write], or nats://[USER:PASS@|TOKEN@]HOST:PORT[,HOST:PORT...][?stream=NAME][&replicas=N] on a NATS cluster with JetStream (tls://... for TLS, with tls_ca=FILE, tls_cert=FILE&tls_key=FILE; creds=FILE or nkey=FILE to authenticate; replicas=N keeps the stream on N servers; without it an existing stream keeps its own, a new one gets 1)")
		natsDir          = fs.String("nats-embed", "", "run a NATS node with JetStream inside this process, its data in this directory, as the hub's store (no -store); with -nats-cluster and -nats-routes, hubs are one replicated cluster")
		natsCluster      = fs.String("nats-cluster", "", "with -nats-embed: this node's cluster address, HOST:PORT, that the other nodes' -nats-routes name (neither authenticated nor encrypted: a private network only)")
		natsRoutes       = fs.String("nats-routes", "", "with -nats-cluster: the cluster addresses of the nodes, HOST:PORT,HOST:PORT,..., this node's own may be included (the same list on every hub)")
		natsListen       = fs.String("nats-listen", "", "with -nats-embed: a client port for NATS tools, HOST:PORT (default: none)")
		natsReplicas     = fs.Int("nats-replicas", 0, "with -nats-embed: the nodes that keep each update, acknowledged once a majority has it (default 3 with routes, 2 for a cluster of two, else 1)")
		natsWait         = fs.Duration("nats-wait", 2*time.Minute, "with -nats-embed: how long to wait for the NATS cluster before giving up (a new cluster needs all its nodes, a running one a majority)")
		insecurePublish  = fs.Bool("insecure-publish", false, "accept publishes without a valid token (closed networks only!)")
		cpuProfile       = fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
		writeDelay       = fs.Duration("write-delay", 0, "space each stream's writes at least this far apart (fewer system calls under heavy fan-out)")
		metricsAddr      = fs.String("metrics-addr", "", "a second listener, for operators only, serving /metrics (Prometheus), /healthz (liveness) and /readyz (readiness); never on -addr")
		logLevel         = fs.String("log-level", "info", "log level: debug, info, warn or error")
		traces           = fs.String("traces", "", "write the hub's OpenTelemetry spans to this file as JSON, - for stderr (applications embedding the hub install their own exporter)")
		drain            = fs.Duration("drain", 0, "on shutdown, end the streams gradually over this window, each told to reconnect in about a second, rather than all at once")
		_                = fs.Bool("low-memory", false, "kept for compatibility: HTTP/1.1 streams are taken over from net/http after their headers by default (see -goroutine-streams)")
		goroutineStreams = fs.Bool("goroutine-streams", false, "write every stream from its handler's goroutine through net/http (about 25 KB per idle stream) instead of taking HTTP/1.1 connections over after their headers (about 2 KB)")
		debugger         = fs.Bool("debugger", false, "serve the debugger page at the hub path followed by /debug/ (it shows what the viewer's token, cookie or session allows)")
		playground       = fs.Bool("playground", false, "the debugger, with a self-serve token that publishes and subscribes to everything (local development only!)")
		// Tokens (issuer and keys), anonymous subscribers, active
		// subscriptions, CORS, the cookie, and the history's memory bound.
		issuer         = fs.String("issuer", "", "trusted token issuer (iss)")
		publisherJWKS  = fs.String("publisher-jwks", "", "JWK Set file verifying publisher tokens")
		subscriberJWKS = fs.String("subscriber-jwks", "", "JWK Set file verifying subscriber tokens")
		anonymous      = fs.Bool("anonymous", false, "accept subscribers without a token")
		subscriptions  = fs.Bool("subscriptions", false, "enable active subscriptions")
		corsOrigins    = fs.String("cors-origins", "", "comma-separated browser origins allowed to subscribe")
		cookie         = fs.String("cookie", "", "name of the cookie carrying the access token")
		historyBytes   = fs.Int64("history-bytes", memstore.DefaultMaxBytes, "memory the in-memory store's history may take, in bytes")
		legacyClients  = fs.Bool("legacy-clients", false, "also accept pre-standard clients (Symfony's component, API Platform, older hubs' clients): tokens with the mercure claim verified by the keys of -publisher-jwks and -subscriber-jwks, topic= selectors, the mercureAuthorization cookie, the authorization query parameter")
		// Limits (mercure.Limits): 0 keeps the library's default.
		maxConns       = fs.Int("max-connections", 0, "streams open at once (default 10000); more get 429")
		maxConnsClient = fs.Int("max-connections-per-client", 0, "streams open at once per client IP (default none: behind a proxy every client has its address)")
		maxBody        = fs.Int64("max-body-bytes", 0, "size of a publish or QUERY body (default 1 MiB); more get 413")
		bodyTimeout    = fs.Duration("body-timeout", 0, "time a request body may take to arrive (default 10s); slower ones get 408")
		maxMatchers    = fs.Int("max-matchers", 0, "matchers of one subscribe request (default 64)")
		maxPerTopic    = fs.Int("max-patterns-per-topic", 0, "distinct URL patterns one topic is evaluated against (default 128)")
		queueEvents    = fs.Int("queue-events", 0, "updates waiting for one stream before it is dropped (default 1024)")
		queueBytes     = fs.Int("queue-bytes", 0, "bytes waiting for one stream before it is dropped (default 8 MiB)")
		maxQueuedBytes = fs.Int64("max-queued-bytes", 0, "bytes waiting in all the streams' queues together (default 128 MiB)")
		maxReplays     = fs.Int("max-replays", 0, "replays of history at once (default 64); more wait, then get 503")
		replayTimeout  = fs.Duration("replay-timeout", 0, "time one replay may take (default 30s)")
		maxPending     = fs.Int("max-pending-updates", 0, "updates recorded but not yet handed to the streams (default 1024); past it publishers wait, a POST at most 5s, then 503")
		keepAlive      = fs.Duration("keep-alive", 0, "silence after which a stream gets a comment (default 15s); keep it below the idle timeout of the proxies in front")
	)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := setLogLevel(*logLevel); err != nil {
		return nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	embed, err := checkNATSEmbed(given, *natsDir, *natsCluster, *natsRoutes, *natsListen, *natsReplicas, *natsWait)
	if err != nil {
		return nil, err
	}
	if *metricsAddr != "" && *metricsAddr == *addr && !strings.HasSuffix(*addr, ":0") {
		return nil, errors.New("-metrics-addr must differ from -addr: metrics and health are for operators, not the hub's clients")
	}

	var cert *certificate
	if *tlsCert != "" || *tlsKey != "" {
		if cert, err = loadCertificate(*tlsCert, *tlsKey); err != nil {
			return nil, err
		}
	}
	if *hubURL == "" {
		scheme := "http://"
		if cert != nil {
			scheme = "https://"
		}
		*hubURL = scheme + *addr + mercure.DefaultHubPath
	}
	opts := []mercure.Option{
		mercure.WithLogger(log),
		mercure.WithLimits(mercure.Limits{WriteDelay: *writeDelay}),
		mercure.WithLimits(mercure.Limits{Drain: *drain}),
		mercure.WithLimits(mercure.Limits{
			MaxConnections:          *maxConns,
			MaxConnectionsPerClient: *maxConnsClient,
			MaxBodyBytes:            *maxBody,
			BodyTimeout:             *bodyTimeout,
			MaxMatchers:             *maxMatchers,
			MaxPatternsPerTopic:     *maxPerTopic,
			QueueEvents:             *queueEvents,
			QueueBytes:              *queueBytes,
			MaxQueuedBytes:          *maxQueuedBytes,
			MaxReplays:              *maxReplays,
			ReplayTimeout:           *replayTimeout,
			MaxPendingUpdates:       *maxPending,
			KeepAlive:               *keepAlive,
		}),
	}
	if *issuer != "" {
		iss := mercure.Issuer{ID: *issuer}
		var err error
		if iss.PublisherKeys, err = readJWKS(*publisherJWKS); err != nil {
			return nil, err
		}
		if iss.SubscriberKeys, err = readJWKS(*subscriberJWKS); err != nil {
			return nil, err
		}
		opts = append(opts, mercure.WithIssuer(iss))
		if *legacyClients {
			// The launch contract: pre-standard tokens are verified with
			// the same keys, and may carry the issuer's iss.
			opts = append(opts, mercure.WithLegacyClients(mercure.LegacyClients{
				PublisherKeys: iss.PublisherKeys, SubscriberKeys: iss.SubscriberKeys, Issuers: []string{*issuer},
			}))
		}
	} else if *publisherJWKS != "" || *subscriberJWKS != "" {
		return nil, errors.New("-publisher-jwks and -subscriber-jwks need -issuer")
	} else if *legacyClients {
		opts = append(opts, mercure.WithLegacyClients(mercure.LegacyClients{}))
	}
	if *corsOrigins != "" {
		opts = append(opts, mercure.WithCORS(strings.Split(*corsOrigins, ",")...))
	}
	if *subscriptions {
		opts = append(opts, mercure.WithSubscriptions())
		if *subscriberJWKS == "" && !*playground {
			log.Info("-subscriptions without -subscriber-jwks: no token can list who is connected, on the page or through the hub's subscriptions API")
		}
	}
	if *anonymous {
		opts = append(opts, mercure.WithAnonymousSubscribers())
	}
	if *goroutineStreams {
		opts = append(opts, mercure.WithGoroutineStreams())
	}
	if *cookie != "" {
		opts = append(opts, mercure.WithCookieName(*cookie))
	}
	if *insecurePublish {
		log.Warn("publishing without a token is enabled: anyone who can reach this hub can publish")
		opts = append(opts, mercure.WithInsecurePublishing())
	}
	if *debugger {
		opts = append(opts, mercure.WithDebugger())
	}
	if *playground {
		// The hub logs its own warning too.
		log.Warn("-playground: the debugger hands anyone who can reach this hub a token that publishes and subscribes to everything")
		opts = append(opts, mercure.WithInsecurePlayground())
	}
	// The store last: nothing can fail between its opening and the hub's.
	var closeStore func() error
	switch {
	case embed.dir != "":
		st, closeFn, err := openEmbedded(ctx, embed, int64(max(*history, 1)), log)
		if err != nil {
			return nil, err
		}
		opts = append(opts, mercure.WithStore(st))
		closeStore = closeFn
	case *storeSpec == "memory":
		st, err := memstore.New(memstore.WithMaxEvents(*history), memstore.WithMaxBytes(*historyBytes))
		if err != nil {
			return nil, err
		}
		opts = append(opts, mercure.WithStore(st))
	case strings.HasPrefix(*storeSpec, "bolt:") && len(*storeSpec) > len("bolt:"):
		st, err := boltstore.Open(strings.TrimPrefix(*storeSpec, "bolt:"), boltstore.WithMaxEvents(max(*history, 1)))
		if err != nil {
			return nil, err
		}
		opts = append(opts, mercure.WithStore(st))
		closeStore = st.Close
	case isRedisURL(*storeSpec):
		st, closeFn, err := openRedis(*storeSpec, int64(max(*history, 1)))
		if err != nil {
			return nil, err
		}
		opts = append(opts, mercure.WithStore(st))
		closeStore = closeFn
	case strings.HasPrefix(*storeSpec, "postgres://") || strings.HasPrefix(*storeSpec, "postgresql://"):
		st, closeFn, err := openPostgres(*storeSpec, int64(max(*history, 1)))
		if err != nil {
			return nil, err
		}
		opts = append(opts, mercure.WithStore(st))
		closeStore = closeFn
	case isNATSURL(*storeSpec):
		st, closeFn, err := openNATS(*storeSpec, int64(max(*history, 1)))
		if err != nil {
			return nil, err
		}
		opts = append(opts, mercure.WithStore(st))
		closeStore = closeFn
	default:
		return nil, fmt.Errorf("-store %q: want memory, bolt:PATH, redis://HOST:PORT/DB, redis-sentinel://HOST:PORT/DB?master=NAME, redis-cluster://HOST:PORT, postgres://USER@HOST:PORT/DB or nats://HOST:PORT", *storeSpec)
	}
	var closeTraces func(context.Context) error
	if *traces != "" {
		tp, closeFn, err := openTraces(*traces)
		if err != nil {
			if closeStore != nil {
				closeStore()
			}
			return nil, err
		}
		opts = append(opts, mercure.WithTracerProvider(tp))
		closeTraces = closeFn
	}
	hub, err := mercure.New(*hubURL, opts...)
	if err != nil {
		if closeStore != nil {
			_ = closeStore()
		}
		return nil, err
	}
	mux := http.NewServeMux()
	hub.Mount(mux) // the hub, its subscriptions API and its metadata
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, struct {
			HubPath            string
			Presence, Debugger bool
		}{hub.Path(), *subscriptions, *debugger || *playground})
	})
	// Health is for operators only, on -metrics-addr: its answers name the
	// store's failure, addresses included.
	s := &server{addr: *addr, cert: cert, hub: hub, handler: mux, cpuProfile: *cpuProfile, closeStore: closeStore, closeTraces: closeTraces,
		idleTimeout: time.Minute, shutdownTimeout: 5*time.Second + *drain, headerTimeout: 10 * time.Second, metricsAddr: *metricsAddr}
	if *metricsAddr != "" {
		ops := http.NewServeMux()
		ops.Handle("GET /metrics", promhub.Handler(hub))
		ops.Handle("GET /healthz", probe(hub.Live))
		ops.Handle("GET /readyz", probe(hub.Ready))
		s.metrics = ops
	}
	return s, nil
}

// probe serves a health check: 200 "ok" while check reports nil, else 503
// with the reason, in plain text.
func probe(check func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if err := check(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}

// setLogLevel sets the level of main's logger from -log-level.
func setLogLevel(name string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(name)); err != nil {
		return fmt.Errorf("-log-level %q: want debug, info, warn or error", name)
	}
	logLevel.Set(l)
	return nil
}

// redisSchemes maps the schemes of the Redis URLs of -store to the kind
// of client, and tells which connect with TLS.
var redisSchemes = map[string]struct {
	kind string // "", "sentinel" or "cluster"
	tls  bool
}{
	"redis": {"", false}, "rediss": {"", true},
	"redis-sentinel": {"sentinel", false}, "rediss-sentinel": {"sentinel", true},
	"redis-cluster": {"cluster", false}, "rediss-cluster": {"cluster", true},
}

// isRedisURL reports whether spec is one of the Redis URLs of -store.
func isRedisURL(spec string) bool {
	scheme, _, ok := strings.Cut(spec, "://")
	_, known := redisSchemes[scheme]
	return ok && known
}

// redisURL is a Redis URL of -store, taken apart.
type redisURL struct {
	kind     string // "", "sentinel" or "cluster"
	stream   string // the stream key
	replicas int    // redisstore.WithReplicas
	// goRedis is the URL for go-redis's parser of the kind: its scheme
	// redis or rediss, the first address, the others in addr
	// parameters, the master's name in master_name.
	goRedis string
	// shown is the URL for error messages, passwords hidden.
	shown string
}

// parseRedisURL takes a Redis URL of -store apart (see the package
// documentation). It parses the list of addresses itself: net/url takes
// a host list for one host, and refuses one of IPv6 addresses.
func parseRedisURL(spec string) (redisURL, error) {
	scheme, rest, _ := strings.Cut(spec, "://")
	sc := redisSchemes[scheme]
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hosts := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
	}
	u, err := url.Parse("redis://host" + tail)
	if err != nil {
		return redisURL{}, fmt.Errorf("-store: invalid %s URL", scheme)
	}
	q := u.Query()
	r := redisURL{kind: sc.kind, shown: redactRedis(scheme, userinfo, hosts, u.Path, q)}
	bad := func(format string, a ...any) (redisURL, error) {
		return redisURL{}, fmt.Errorf("-store %s: %s", r.shown, fmt.Sprintf(format, a...))
	}

	addrs := strings.Split(hosts, ",")
	switch {
	case hosts == "":
		return bad("no address: want %s://HOST:PORT", scheme)
	case sc.kind == "" && len(addrs) > 1:
		return bad("%s:// takes one address; several are for %s-sentinel:// or %s-cluster://", scheme, scheme, scheme)
	}
	for _, a := range addrs {
		if host, port, err := net.SplitHostPort(a); sc.kind != "" && (err != nil || host == "" || port == "") {
			return bad("address %q: want HOST:PORT", a)
		}
	}

	r.stream = q.Get("stream")
	q.Del("stream")
	if r.stream == "" {
		r.stream = "mercure"
		if sc.kind == "cluster" {
			r.stream = "{mercure}" // a hash tag: every key of the store in one slot
		}
	}
	if q.Has("replicas") {
		n, err := strconv.Atoi(q.Get("replicas"))
		if err != nil || n < 0 {
			return bad("replicas=%q: want the number of replicas that must have an update before it is acknowledged, 0 or more", q.Get("replicas"))
		}
		r.replicas = n
		q.Del("replicas")
	}
	switch sc.kind {
	case "sentinel":
		// master, as the contract of -store says; go-redis's own
		// master_name too.
		master, alias := q.Get("master"), q.Get("master_name")
		if master != "" && alias != "" && master != alias {
			return bad("master=%s and master_name=%s: want one name", master, alias)
		}
		if master == "" {
			master = alias
		}
		if master == "" {
			return bad("no master: add ?master=NAME, the name the sentinels know the primary by")
		}
		q.Del("master")
		q.Set("master_name", master)
	case "cluster":
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return bad("database %s: a Redis Cluster has only database 0", p)
		}
		u.Path = ""
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	goScheme := "redis"
	if sc.tls {
		goScheme = "rediss"
	}
	r.goRedis = goScheme + "://" + userinfo + addrs[0] + u.EscapedPath()
	if len(q) > 0 {
		r.goRedis += "?" + q.Encode()
	}
	return r, nil
}

// redactRedis returns a Redis URL of -store with its passwords hidden:
// that of the user information and the query parameter password.
func redactRedis(scheme, userinfo, hosts, path string, q url.Values) string {
	if user, _, ok := strings.Cut(strings.TrimSuffix(userinfo, "@"), ":"); ok {
		userinfo = user + ":xxxxx@"
	}
	if q.Has("password") {
		q = maps.Clone(q)
		q.Set("password", "xxxxx")
	}
	shown := scheme + "://" + userinfo + hosts + path
	if len(q) > 0 {
		shown += "?" + q.Encode()
	}
	return shown
}

// openRedis opens a store on the Redis stream of a Redis URL of -store,
// keeping about maxLen events: one server, a primary behind sentinels,
// or a cluster (see the package documentation). The returned func closes
// the store, then the client.
func openRedis(spec string, maxLen int64) (*redisstore.Store, func() error, error) {
	r, err := parseRedisURL(spec)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*redisstore.Store, func() error, error) {
		// net/url's errors quote the URL, which go-redis gets with its
		// passwords.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, fmt.Errorf("-store %s: %w", r.shown, err)
	}
	// Each client with deadlines on reads and writes, so that a Redis
	// that stops answering fails calls within the store's timeout (see
	// package redisstore).
	var client redis.UniversalClient
	switch r.kind {
	case "sentinel":
		opts, err := redis.ParseFailoverURL(r.goRedis)
		if err != nil {
			return fail(err)
		}
		if opts.ReplicaOnly || opts.RouteByLatency || opts.RouteRandomly {
			// The store writes, and its feed must read what it wrote.
			return fail(errors.New("the store needs the primary: no replica_only, route_by_latency or route_randomly"))
		}
		opts.ContextTimeoutEnabled = true
		client = redis.NewFailoverClient(opts)
	case "cluster":
		opts, err := redis.ParseClusterURL(r.goRedis)
		if err != nil {
			return fail(err)
		}
		// (redisstore has the client read the cluster's layout again
		// when a call fails: after a failover, that is how it learns of
		// the new primary.)
		opts.ContextTimeoutEnabled = true
		client = redis.NewClusterClient(opts)
	default:
		opts, err := redis.ParseURL(r.goRedis)
		if err != nil {
			return fail(err)
		}
		opts.ContextTimeoutEnabled = true
		client = redis.NewClient(opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return fail(err)
	}
	opts := []redisstore.Option{redisstore.WithMaxLen(maxLen)}
	if r.replicas > 0 {
		opts = append(opts, redisstore.WithReplicas(r.replicas))
	}
	st, err := redisstore.New(client, r.stream, opts...)
	if err != nil {
		_ = client.Close()
		return fail(err)
	}
	return st, func() error { return errors.Join(st.Close(), client.Close()) }, nil
}

// openPostgres opens a store on the PostgreSQL database of a postgres://
// or postgresql:// URL, keeping about maxEvents events. Its query
// parameter prefix names the tables (default mercure); the others go to
// pgx. The returned func closes the store, then the pool.
func openPostgres(spec string, maxEvents int64) (*pgstore.Store, func() error, error) {
	u, err := url.Parse(spec)
	if err != nil {
		return nil, nil, errors.New("-store: invalid postgres URL")
	}
	q := u.Query()
	prefix := q.Get("prefix")
	if prefix == "" {
		prefix = pgstore.DefaultPrefix
	}
	q.Del("prefix")
	u.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, nil, fmt.Errorf("-store %s: %w", u.Redacted(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("-store %s: %w", u.Redacted(), err)
	}
	st, err := pgstore.New(ctx, pool, pgstore.WithPrefix(prefix), pgstore.WithMaxEvents(maxEvents))
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("-store %s: %w", u.Redacted(), err)
	}
	return st, func() error {
		err := st.Close()
		pool.Close()
		return err
	}, nil
}

// readJWKS reads a JWK Set file; an empty path means no keys.
func readJWKS(path string) (jwk.Set, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	set, err := jwk.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return set, nil
}

func run(args []string, log *slog.Logger) error {
	// Before the store opens: an embedded NATS node may wait minutes for
	// its cluster, and a signal then ends the wait.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := configureContext(ctx, args, log)
	if err != nil {
		return err
	}
	if s.cpuProfile != "" {
		f, err := os.Create(s.cpuProfile)
		if err == nil {
			defer f.Close()
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			return errors.Join(err, s.shutdown(nil, log))
		}
		defer pprof.StopCPUProfile()
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return errors.Join(err, s.shutdown(nil, log))
	}
	if s.metricsAddr != "" {
		if s.metricsLn, err = net.Listen("tcp", s.metricsAddr); err != nil {
			ln.Close()
			return errors.Join(err, s.shutdown(nil, log))
		}
	}
	return s.serve(ctx, ln, log)
}

// serve serves the hub on ln until ctx ends (the signal), then shuts
// everything down.
func (s *server) serve(ctx context.Context, ln net.Listener, log *slog.Logger) error {
	srv := &http.Server{
		Handler: s.handler,
		// No ReadTimeout or WriteTimeout: each bounds a whole request or
		// response, and a stream lasts for hours. The hub bounds, per
		// request, what they would: the body (Limits.BodyTimeout) and each
		// write to a stream (Limits.WriteTimeout). What it never sees is
		// bounded here: the headers, and the idle time between requests
		// on a keep-alive connection.
		// net/http bounds a TLS handshake by it too.
		ReadHeaderTimeout: s.headerTimeout,
		IdleTimeout:       s.idleTimeout,
		// net/http's own complaints (a failed TLS handshake, a panic in
		// a handler) join the hub's structured logs.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2)
	if s.cert != nil {
		srv.TLSConfig = s.cert.config()
		// Both, whatever GODEBUG says: browsers get HTTP/2, older clients
		// and proxies HTTP/1.1 (whose streams the hub takes over from
		// net/http after their headers).
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go s.reloadOn(ctx, hup, log)
		s.cert.logTo(log)
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	log.Info("hub listening", "addr", ln.Addr().String(), "hub_url", s.hub.URL())
	var ops *http.Server
	if s.metricsLn != nil {
		ops = &http.Server{Handler: s.metrics, ReadHeaderTimeout: s.headerTimeout, IdleTimeout: s.idleTimeout}
		go func() { errc <- ops.Serve(s.metricsLn) }()
		log.Info("metrics and health listening", "addr", s.metricsLn.Addr().String())
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("shutting down")
	}
	err = errors.Join(err, s.shutdown(srv, log))
	if ops != nil {
		// Last: /readyz says 503 while the hub shuts down.
		_ = ops.Close()
	}
	return err
}

// reloadOn reads the certificate again at each signal on hup, until ctx
// ends; a pair that fails to load leaves the one served so far.
func (s *server) reloadOn(ctx context.Context, hup <-chan os.Signal, log *slog.Logger) {
	for {
		select {
		case <-hup:
			if err := s.cert.reload(); err != nil {
				log.Error("SIGHUP: the TLS certificate was not reloaded; the previous one is still served", "error", err)
				continue
			}
			log.Info("SIGHUP: TLS certificate reloaded")
			s.cert.logTo(log)
		case <-ctx.Done():
			return
		}
	}
}

// shutdown stops the hub, then the server (when there is one), then
// closes the store whatever failed before, so that bolt syncs and
// releases its file lock. Clients still holding connections when the
// shutdown timeout ends (with a body that never comes, say) are cut: that
// is no failure of the hub's.
func (s *server) shutdown(srv *http.Server, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	var errs []error
	if srv != nil {
		// Each stream the drain ends closes its connection, so that its
		// client reconnects afresh (to another instance) rather than on
		// this one's kept-alive connection.
		srv.SetKeepAlivesEnabled(false)
	}
	// Streams first: srv.Shutdown would wait for them, never ending them.
	if err := s.hub.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shutting down the hub: %w", err))
	}
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			log.Info("closing the connections still busy", "reason", err)
			_ = srv.Close()
		}
	}
	if s.closeStore != nil {
		if err := s.closeStore(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	if s.closeTraces != nil {
		if err := s.closeTraces(ctx); err != nil {
			errs = append(errs, fmt.Errorf("writing the last spans: %w", err))
		}
	}
	return errors.Join(errs...)
}

// openTraces returns a tracer provider that writes every span to path
// (stderr for "-") as JSON, in batches, and the func that flushes it and
// closes the file. An OTLP exporter would pull gRPC and protobuf into
// the module's requirements for every user of the library; applications
// embedding the hub install the exporter they use (WithTracerProvider).
func openTraces(path string) (trace.TracerProvider, func(context.Context) error, error) {
	w := io.Writer(os.Stderr)
	closeFile := func() error { return nil }
	if path != "-" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("-traces: %w", err)
		}
		w, closeFile = f, f.Close
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		closeFile()
		return nil, nil, fmt.Errorf("-traces: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	return tp, func(ctx context.Context) error {
		return errors.Join(tp.Shutdown(ctx), closeFile())
	}, nil
}
