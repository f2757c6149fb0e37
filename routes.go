package mercure

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
)

// Routing. The hub URL is the hub's identity; the path a request reaches
// it at is where the application mounted it. The hub recognizes its
// endpoint and its sub-routes only right after a mount point: its own
// path, or a path that [WithProxyPath] declared (a proxy in front that
// strips or adds a prefix). It reads the request path
// as the server received it (the request line, r.RequestURI), so that a
// part stripped in the application ([http.StripPrefix]) is accounted
// for: the request names a route when that path is a mount point followed
// by the route. A path that merely ends like one of the hub's routes
// (/other/api/realtime/.well-known/mercure/subscriptions, or the hub path
// twice) names none, whatever a router hands the hub: a guard that an
// application puts on the hub's paths is never bypassed by another
// path reaching the same handler.

// routing is where the hub is reached: fixed when it is built, read
// without a lock.
type routing struct {
	mounts        []mountPoint // the hub path, or WithProxyPath's (see route)
	metadataPaths []string     // where its metadata is, escaped
	warnedRoute   atomic.Bool  // see notServed
	warnedAPIOff  atomic.Bool  // see notServed
}

// routeKind is what a request path names, relative to the hub.
type routeKind int

const (
	routeOther    routeKind = iota // none of the hub's routes
	routeHub                       // the hub endpoint
	routeAPI                       // the subscriptions API
	routeAPIOther                  // under the subscriptions API, but no resource of it
	routeDebug                     // the debugger (WithDebugger), under hub path + /debug
	routeMetadata                  // the protected resource metadata
)

// mountPoint is a path at which the hub endpoint is reached: escaped as
// declared, and its decoded segments (none for "/").
type mountPoint struct {
	path string
	segs []string
}

func newMountPoint(escaped string) mountPoint {
	return mountPoint{path: escaped, segs: hubSegments(escaped)}
}

// route tells what r's path names. For routeAPI, api holds the escaped
// segments after "subscriptions" (none, two or three), for routeDebug
// those after "debug". The cost is linear in the path's length.
func (h *Hub) route(r *http.Request) (kind routeKind, api []string) {
	full := requestPath(r)
	kind = routeOther
	if slices.Contains(h.routes.metadataPaths, full) {
		return routeMetadata, nil
	}
	for _, m := range h.routes.mounts {
		rest, ok := m.lead(full)
		if !ok {
			continue
		}
		if k, a := h.subRoute(rest, m.segs == nil); k != routeOther {
			return k, a
		}
	}
	return kind, nil
}

// requestPath is the escaped path of r as the server received it: the
// path of r.RequestURI when r's path is a trailing part of it (what
// [http.StripPrefix] and routers leave), else r's own path (a request
// built in the process, or rewritten by a middleware: then it is all the
// hub can know).
func requestPath(r *http.Request) string {
	p := r.URL.EscapedPath()
	raw := r.RequestURI
	if raw == "" || raw == "*" {
		return p
	}
	if raw[0] != '/' { // absolute-form, as proxies send
		u, err := url.ParseRequestURI(raw)
		if err != nil {
			return p
		}
		raw = u.EscapedPath()
	} else if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw = raw[:i]
	}
	if !strings.HasSuffix(raw, p) || (p != "" && p[0] != '/') {
		return p
	}
	return raw
}

// lead tells whether the escaped path p begins with the mount point, its
// segments compared decoded, and returns what follows it.
func (m mountPoint) lead(p string) (rest string, ok bool) {
	for _, want := range m.segs {
		if len(p) == 0 || p[0] != '/' {
			return "", false
		}
		seg, _, _ := strings.Cut(p[1:], "/")
		v, err := url.PathUnescape(seg)
		if err != nil || v != want {
			return "", false
		}
		p = p[1+len(seg):]
	}
	return p, true
}

// subRoute tells what rest, the escaped path after a mount point, names.
// At the root mount point ("/"), rest keeps the leading slash: "" and "/"
// are both the endpoint there.
func (h *Hub) subRoute(rest string, root bool) (routeKind, []string) {
	switch {
	case rest == "" || (root && rest == "/"):
		return routeHub, nil
	case rest[0] != '/':
		return routeOther, nil
	}
	name, after, _ := strings.Cut(rest[1:], "/")
	switch {
	case name == "debug" && h.ops.debug != nil:
		if len(rest) == len("/debug") {
			return routeDebug, nil
		}
		return routeDebug, strings.Split(after, "/")
	case name != "subscriptions":
		return routeOther, nil
	case len(rest) == len("/subscriptions"):
		return routeAPI, nil
	}
	api := strings.SplitN(after, "/", 4)
	if (len(api) == 2 || len(api) == 3) && (api[0] == MatchExact || api[0] == MatchURLPattern) {
		return routeAPI, api
	}
	return routeAPIOther, nil
}

// hubSegments returns the decoded segments of the escaped hub path, none
// for "/".
func hubSegments(escaped string) []string {
	if escaped == "/" {
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, s := range segs {
		if v, err := url.PathUnescape(s); err == nil {
			segs[i] = v
		}
	}
	return segs
}

// notServed answers a request that reached the hub at a path it does not
// serve with a 404 saying what it serves, and logs the same at Warn, once
// per hub and cause: a misconfigured mount shows at the first request,
// and no client can flood the log.
func (h *Hub) notServed(w http.ResponseWriter, r *http.Request, kind routeKind) {
	p := requestPath(r)
	if kind == routeAPI || kind == routeAPIOther { // WithSubscriptions is off
		if h.routes.warnedAPIOff.CompareAndSwap(false, true) {
			h.log.Warn("mercure: a request for the subscriptions API reached the hub, which serves it only with WithSubscriptions (logged once)", "path", p)
		}
		writeProblem(w, http.StatusNotFound, "this hub does not serve the subscriptions API; got "+quote(p))
		return
	}
	var at []string
	for _, m := range h.routes.mounts {
		at = append(at, m.path)
	}
	serves := "its endpoint"
	if h.cfg.subscriptions {
		serves += ", the subscriptions API ({mount}/subscriptions[/{type}/{topic}[/{subscriber}]])"
	}
	if h.ops.debug != nil {
		serves += ", the debugger ({mount}/debug/)"
	}
	mounts := strings.Join(at, " and ")
	if h.routes.warnedRoute.CompareAndSwap(false, true) {
		h.log.Warn("mercure: a request reached the hub at a path it does not serve: is the router routing another path to the hub, or a proxy in front rewriting the hub path without WithProxyPath saying so? (logged once)",
			"path", p, "mounts", mounts)
	}
	writeProblem(w, http.StatusNotFound, fmt.Sprintf(
		"this hub serves %s at %s only; got %s", serves, mounts, quote(p)))
}

// Mux is the part of a router that [Hub.Mount] uses: [http.ServeMux] and
// chi's routers implement it.
type Mux interface {
	Handle(pattern string, handler http.Handler)
}

// Mount registers the hub on mux, a router that sees full paths, at
// every path the hub serves: its path, and each of [WithProxyPath];
// below them, the subscriptions API (with [WithSubscriptions]) and the
// debugger (with [WithDebugger]); and the protected resource metadata
// ([Hub.MetadataPath]), which lies outside the hub path. The patterns
// read the same in [http.ServeMux] and in chi.
//
// A router that is not a Mux, or one reached under a prefix, routes the
// hub's paths and the metadata path to [Hub.ServeHTTP] by its own means
// (docs/embedding.md has the recipes). Whatever the router hands it, the
// hub serves a route only right after where it is mounted, as the request
// line names it ([http.StripPrefix] counted back in): a path that merely
// ends like one of its routes gets 404, so that a middleware guarding the
// hub's paths cannot be walked around.
func (h *Hub) Mount(mux Mux) {
	for _, m := range h.routes.mounts {
		h.mountAt(mux, m.path)
	}
	for _, p := range h.routes.metadataPaths {
		mux.Handle(p, h)
	}
}

// mountPoints returns where a hub with the escaped hub path is reached:
// its path, or the proxies' paths when there are any (see
// WithProxyPath), without repeats; and where its metadata is: its own
// metadata path, and that path behind each prefix that a proxy adds.
func mountPoints(hubPath string, proxyPaths []string) ([]mountPoint, []string) {
	paths := []string{hubPath}
	if len(proxyPaths) > 0 {
		paths = proxyPaths
	}
	var mounts []mountPoint
	metadata := []string{metadataPrefix + hubPath}
	for _, p := range paths {
		if slices.ContainsFunc(mounts, func(m mountPoint) bool { return m.path == p }) {
			continue
		}
		mounts = append(mounts, newMountPoint(p))
		if prefix, ok := strings.CutSuffix(p, hubPath); ok && prefix != "" && !slices.Contains(metadata, prefix+metadata[0]) {
			metadata = append(metadata, prefix+metadata[0])
		}
	}
	return mounts, metadata
}

// mountAt registers the hub's routes on mux at path.
func (h *Hub) mountAt(mux Mux, path string) {
	mux.Handle(path, h)
	if h.cfg.subscriptions {
		api := path + "/subscriptions"
		if path == "/" {
			api = "/subscriptions"
		}
		mux.Handle(api, h)
		mux.Handle(api+"/{type}/{topic}", h)
		mux.Handle(api+"/{type}/{topic}/{subscriber}", h)
	}
	if h.ops.debug != nil {
		h.mountDebugger(mux, path)
	}
}
