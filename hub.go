package mercure

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/topicurl"
	"github.com/mercurekit/mercure/store"
)

// Hub is a Mercure hub. It is an [http.Handler] serving the hub URL (GET
// and QUERY subscribe, POST publishes) and the hub's other routes;
// [Hub.Mount] registers them on a router. Application code publishes
// with [Hub.Publish].
//
// A Hub is safe for concurrent use. Every Hub is independent: two hubs in
// one process share nothing.
type Hub struct {
	cfg      config
	url      string // hub URL, serialized
	path     string // hub path (DIS-1), escaped
	log      *slog.Logger
	tracer   trace.Tracer
	resolver *topicurl.Resolver

	store     store.Store
	unlisten  func()
	detachHub func() // from a store.OutboxStore; nil for another store
	appending appending
	replays   chan struct{} // a slot per replay running (Limits.MaxReplays)

	// engine runs the streams: the feed from the store, dispatch, the
	// queues and the writers.
	engine *engine.Engine

	// The components, each with its file and its locks.
	auth     authorization // authz.go: who may do what
	presence presence      // subscriptions.go: the active subscriptions
	sessions sessions      // session.go: the streams of sessions and subjects
	routes   routing       // routes.go: where the hub is reached
	ops      operations    // operations.go: life, metrics, health
}

// New returns a hub whose absolute public URL is hubURL, configured by
// opts. hubURL is an http or https URL without query, fragment, user info
// or trailing slash; without a path it gets [DefaultHubPath]. It is the
// hub's identity (spec §Discovery): the resource that tokens name in aud,
// the base of relative topics, the root of the reserved topic namespace;
// never inferred from a request's Host. Errors wrap [ErrInvalidOption].
func New(hubURL string, opts ...Option) (*Hub, error) {
	cfg, err := newConfig(hubURL, opts)
	if err != nil {
		return nil, err
	}
	hubURL = cfg.url.String()
	resolver, err := topicurl.New(hubURL)
	if err != nil {
		return nil, fmt.Errorf("%w: hub URL: %v", ErrInvalidOption, err)
	}
	h := &Hub{
		cfg:      cfg,
		url:      hubURL,
		path:     cfg.url.EscapedPath(),
		log:      slog.New(traceHandler{cfg.logger.Handler()}),
		tracer:   newTracer(cfg.tracerProvider),
		resolver: resolver,
		store:    cfg.store,
		replays:  make(chan struct{}, cfg.limits.MaxReplays),
	}
	h.routes.mounts, h.routes.metadataPaths = mountPoints(h.path, cfg.proxyPaths)
	h.sessions.init()
	h.presence.active = make(map[*Subscription]struct{})
	if err := h.initAuth(); err != nil {
		return nil, err
	}
	h.engine = engine.New(h.engineConfig())
	h.ops.start()
	if h.auth.servers != nil {
		if err := h.auth.servers.start(h.ops.ctx); err != nil {
			h.ops.stop()
			return nil, err
		}
	}
	h.attachStore()
	if cfg.debugger {
		h.ops.debug = h.startDebugger()
	}
	h.logShares()
	return h, nil
}

// logShares says, at start-up, what share of the connections anonymous
// subscribers may hold, on a hub where they have a share (one where a
// token or a session can authorize a stream, and anonymous streams are
// let in): the cap that refuses them first when the hub fills up.
func (h *Hub) logShares() {
	lim := h.cfg.limits
	if !h.cfg.anonymous || !h.authorizesSubscribers() {
		return
	}
	attrs := []any{"anonymous", lim.MaxAnonymousConnections, "connections", lim.MaxConnections}
	if n := h.anonymousPerClient(); n > 0 {
		attrs = append(attrs, "anonymous_per_client", n)
	}
	h.log.Info("mercure: anonymous subscribers may hold some of the connections; the rest are kept for token and session holders (Limits.MaxAnonymousConnections)", attrs...)
}

// newConfig applies opts to the defaults, for the hub at hubURL, and
// checks the result.
func newConfig(hubURL string, opts []Option) (config, error) {
	cfg := defaultConfig()
	u, err := parseHubURL(hubURL)
	if err != nil {
		return cfg, err
	}
	cfg.url = u
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	cfg.limits = cfg.limits.resolve()
	if err := cfg.limits.check(); err != nil {
		return cfg, err
	}
	return cfg, cfg.checkPlayground()
}

// attachStore starts listening to the store (the default one when none
// was given), from the latest update it holds, and lends it the hub's
// link when it records updates outside the hub. A store.InterestStore is
// told which topics the streams select exactly, so that its feed may
// leave the others out, unless a stream selects more.
func (h *Hub) attachStore() {
	if h.store == nil {
		h.store = defaultStore()
	}
	if is, ok := h.store.(store.InterestStore); ok {
		// The store reads only what the streams need (see
		// engine.FollowInterest), and this hub's instructions.
		want, cancel := is.ListenInterest(h.listener())
		h.unlisten = cancel
		h.engine.FollowInterest(func(all bool, add, remove []string) {
			want(store.Interest{All: all, Add: add, Remove: remove})
		}, []string{h.endStreamsTopic()})
	} else {
		h.unlisten = h.store.Listen(h.listener())
	}
	start := store.Earliest
	if ls, ok := h.store.(store.LatestStore); ok {
		start = ls.LatestID()
	}
	h.engine.Begin(start) // unless an event came meanwhile, which is newer
	if ob, ok := h.store.(store.OutboxStore); ok {
		h.detachHub = ob.AttachHub(store.HubLink{Validate: h.validateEvent, Published: func() { h.ops.metrics.publishedTx.Add(1) }})
	}
}

// parseHubURL checks the hub URL given to [New]: absolute http(s), no
// query, fragment or user info, no trailing slash; no path and "/" alike
// mean DefaultHubPath, as they name the same resource (RFC 9110, section
// 4.2.3).
func parseHubURL(hubURL string) (*url.URL, error) {
	u, err := url.Parse(hubURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: hub URL: %v", ErrInvalidOption, err)
	case !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return nil, fmt.Errorf("%w: hub URL %q is not an absolute http(s) URL", ErrInvalidOption, hubURL)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("%w: hub URL %q has a query, fragment or user info", ErrInvalidOption, hubURL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path, u.RawPath = DefaultHubPath, ""
	}
	if strings.HasSuffix(u.Path, "/") {
		return nil, fmt.Errorf("%w: hub URL %q ends with a slash: name the hub's path without it", ErrInvalidOption, hubURL)
	}
	return u, nil
}

// patternCacheSize bounds the compiled URL patterns that a hub keeps
// beyond those in use, in estimated instructions (see
// [PatternLimits.MaxSize]): a few megabytes.
const patternCacheSize = 1 << 16

// feedStatus records and logs the state of the store's live feed.
func (h *Hub) feedStatus(err error) {
	if err == nil {
		if h.ops.feedErr.Swap(nil) != nil {
			h.log.Info("mercure: the store's feed is back")
		}
		return
	}
	if h.ops.feedErr.Swap(&err) == nil {
		h.log.Error("mercure: the store's feed is failing; subscribers get no update until it recovers", "error", err)
	}
}

// URL returns the hub's public URL.
func (h *Hub) URL() string { return h.url }

// Path returns the path of the hub URL, where the hub is to be mounted.
func (h *Hub) Path() string { return h.path }

// LastEventID returns the id of the last update dispatched, or
// "earliest" ([store.Earliest]) when there has been none (spec §Reconnection, State Reconciliation, and
// Event Sourcing). Applications put it in the last-event-id attribute of
// their Link headers so that clients miss nothing between loading a resource
// and subscribing to its updates.
func (h *Hub) LastEventID() string {
	if id := h.engine.Last().ID; id != "" {
		return id
	}
	return store.Earliest // before New returns
}

// ServeHTTP serves the hub's routes, by the request's path as the
// request line names it ([http.StripPrefix] counted back in): at the hub
// path, or a path of [WithProxyPath], the endpoint (GET and QUERY
// subscribe, POST publishes, OPTIONS lists the methods), the
// subscriptions API below it (with [WithSubscriptions]) and the debugger
// (with [WithDebugger]); at [Hub.MetadataPath], the protected resource
// metadata. Any other path gets 404 with a problem document saying what
// the hub serves; the first is logged at Warn, naming the likely
// misconfiguration.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.ops.debug != nil && h.serveDebugger(w, r) {
		return // the debugger's pages answer no other origin: no CORS
	}
	h.withCORS(w, r, h.serveHub)
}

// withCORS runs next behind the CORS policy, if any: preflights are
// answered without calling next.
func (h *Hub) withCORS(w http.ResponseWriter, r *http.Request, next http.HandlerFunc) {
	if h.auth.cors == nil {
		next(w, r)
		return
	}
	h.auth.cors.ServeHTTP(w, r, next)
}

func (h *Hub) serveHub(w http.ResponseWriter, r *http.Request) {
	switch kind, api := h.route(r); {
	case kind == routeHub:
	case kind == routeAPI && h.cfg.subscriptions:
		h.serveSubscriptionsAPI(w, r, api)
		return
	case kind == routeMetadata:
		h.serveMetadata(w, r)
		return
	case kind == routeAPIOther && h.cfg.subscriptions:
		writeProblem(w, http.StatusNotFound, "no such resource in the subscriptions API")
		return
	default:
		h.notServed(w, r, kind)
		return
	}
	switch r.Method {
	case http.MethodGet, methodQuery:
		h.serveSubscribe(w, r)
	case http.MethodPost:
		h.servePublish(w, r)
	case http.MethodOptions:
		w.Header().Set("Allow", allowHub)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", allowHub)
		writeProblem(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

const (
	methodQuery = "QUERY" // SUB-2: a safe method with a body
	allowHub    = "GET, QUERY, POST, OPTIONS"
)

// Shutdown stops the hub: it refuses new streams and publications, ends
// every open stream (each ends its response properly, so clients see a
// clean end of stream and reconnect), stops listening to the store, and
// returns once all the goroutines serving the hub's streams have returned.
// With [Limits].Drain, it first ends the streams gradually over the drain
// window; a second, concurrent call skips what remains of the drain.
// When ctx ends first, it cuts the remaining streams' connections and
// returns ctx's error.
//
// Call it before [http.Server.Shutdown], which neither waits for streams
// nor ends them (it would wait its whole deadline for them), or register
// it with [http.Server.RegisterOnShutdown] (docs/operations.md shows how).
func (h *Hub) Shutdown(ctx context.Context) error {
	if h.ops.shutting.CompareAndSwap(false, true) && h.cfg.limits.Drain > 0 {
		h.engine.Drain(ctx, h.cfg.limits.Drain)
	}
	h.ops.life.Lock()
	first := !h.ops.closed
	if first {
		h.ops.closed = true
		h.ops.stop()
		h.engine.Stop()
	}
	h.ops.life.Unlock()
	if first {
		h.unlisten()
		if h.detachHub != nil {
			h.detachHub()
		}
	}
	// What the feed still holds is dropped, the streams ending; the
	// dispatcher must not outlive Shutdown. Stopped, it ends within one
	// list of one dispatch, whatever ctx allows.
	h.engine.WaitDispatched(context.Background())
	if h.auth.servers != nil {
		if err := h.auth.servers.shutdown(ctx); err != nil {
			h.engine.AbortAll()
			return err
		}
	}
	// The streams' end events are bounded by ctx too: past it, Shutdown
	// no longer waits for a store that does not answer.
	defer context.AfterFunc(ctx, h.ops.stopEvents)()
	if err := h.engine.Wait(ctx); err != nil {
		return err
	}
	h.ops.background.Wait() // they end at once: h.ops.ctx is done
	return nil
}

// retryAfter is the Retry-After of the statuses that say "not now", in
// seconds: a hub shutting down is replaced soon; limits take longer to
// free up.
var retryAfter = map[int]string{http.StatusTooManyRequests: "10", http.StatusServiceUnavailable: "2"}

// writeProblem answers with an RFC 9457 problem document (AUTH-18). It
// never repeats OAuth error codes, which belong in the challenge.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	b, _ := json.Marshal(struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail,omitempty"`
	}{http.StatusText(status), status, detail})
	hdr := w.Header()
	hdr.Set("Content-Type", "application/problem+json")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if retry := retryAfter[status]; retry != "" && hdr.Get("Retry-After") == "" {
		// A limit or an outage that passes: say when to come back.
		hdr.Set("Retry-After", retry)
	}
	w.WriteHeader(status)
	w.Write(b)
}
