package mercure

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Routing. The hub URL is the hub's identity; the path a request reaches
// it at is where the application mounted it. The hub recognizes its
// endpoint and its sub-routes only right after a mount point: its own
// path, or a path that [Hub.MountUnder] or [Hub.MountAt] declared (a
// proxy in front that strips or adds a prefix). It reads the request path
// as the server received it (the request line, r.RequestURI), so that a
// part stripped in the application ([http.StripPrefix]) is accounted
// for: the request names a route when that path is a mount point followed
// by the route. A path that merely ends like one of the hub's routes
// (/other/api/realtime/.well-known/mercure/subscriptions, or the hub path
// twice) names none, whatever a router hands the hub: a guard that an
// application puts on the hub's paths is never bypassed by another
// path reaching the same handler.

// routeKind is what a request path names, relative to the hub.
type routeKind int

const (
	routeOther    routeKind = iota // none of the hub's routes
	routeHub                       // the hub endpoint
	routeAPI                       // the subscriptions API
	routeAPIOther                  // under the subscriptions API, but no resource of it
	routeDebug                     // the debugger (WithDebugger), under hub path + /debug
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
	for _, m := range *h.mounts.Load() {
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
	case name == "debug" && h.debug != nil:
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

// addMount declares one more path at which the hub is reached.
func (h *Hub) addMount(escaped string) {
	h.mountsMu.Lock()
	defer h.mountsMu.Unlock()
	old := *h.mounts.Load()
	for _, m := range old {
		if m.path == escaped {
			return
		}
	}
	next := append(slices.Clip(old), newMountPoint(escaped))
	h.mounts.Store(&next)
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
		if h.warnedAPIOff.CompareAndSwap(false, true) {
			h.log.Warn("mercure: a request for the subscriptions API reached the hub, which serves it only with WithSubscriptions (logged once)", "path", p)
		}
		writeProblem(w, http.StatusNotFound, "this hub does not serve the subscriptions API; got "+quote(p))
		return
	}
	var at []string
	for _, m := range *h.mounts.Load() {
		at = append(at, m.path)
	}
	serves := "its endpoint"
	if h.cfg.subscriptions {
		serves += ", the subscriptions API ({mount}/subscriptions[/{type}/{topic}[/{subscriber}]])"
	}
	if h.debug != nil {
		serves += ", the debugger ({mount}/debug/)"
	}
	mounts := strings.Join(at, " and ")
	if h.warnedRoute.CompareAndSwap(false, true) {
		h.log.Warn("mercure: a request reached the hub at a path it does not serve: is the router routing another path to the hub, or a proxy in front rewriting the hub path without MountUnder or MountAt saying so? (logged once)",
			"path", p, "mounts", mounts)
	}
	writeProblem(w, http.StatusNotFound, fmt.Sprintf(
		"this hub serves %s at %s only; got %s", serves, mounts, quote(p)))
}

// Mux is the part of a router that [Hub.Mount] uses: [http.ServeMux] and
// chi's routers implement it. (A gorilla/mux Router's Handle returns its
// route: see [Hub.Mount] for its recipe.)
type Mux interface {
	Handle(pattern string, handler http.Handler)
}

// Mount registers on mux, at their full paths, the hub path, the
// subscriptions API (with [WithSubscriptions]), the debugger (with
// [WithDebugger] only) and the protected resource metadata path
// ([Hub.MetadataPath], RFC 9728 section 3.1), which lies outside the hub
// path. The patterns read the same in [http.ServeMux] and in chi: the hub
// path, hub path + "/subscriptions", and
// hub path + "/subscriptions/{type}/{topic}[/{subscriber}]", one segment
// per wildcard; hub path + "/debug", "/debug/" and "/debug/{file}". For a
// router that is reached under a prefix, use [Hub.MountUnder]; behind a
// proxy that adds a prefix, [Hub.MountAt].
//
// The hub also serves where an application routes it otherwise; the
// recipes, for the hub URL
// https://example.com/api/realtime/.well-known/mercure:
//
//	// net/http, at the root:
//	hub.Mount(mux)
//	// net/http, behind http.StripPrefix("/api/realtime", inner):
//	hub.MountUnder(inner, "/api/realtime")
//	mux.Handle(hub.MetadataPath(), hub.MetadataHandler())
//	// chi, at the root:
//	hub.Mount(r)
//	// chi, in r.Route("/api/realtime", fn) or under r.Mount("/api/realtime", sub):
//	sub.Mount("/.well-known/mercure", hub) // or hub.MountUnder(sub, "/api/realtime")
//	r.Handle(hub.MetadataPath(), hub.MetadataHandler())
//	// gorilla/mux, at the root or in r.PathPrefix("/api/realtime").Subrouter(),
//	// r being mux.NewRouter().UseEncodedPath(), which keeps the %2F of
//	// topics inside their segments (without it, gorilla cleans them away):
//	sub.PathPrefix("/.well-known/mercure").Handler(hub)
//	r.Handle(hub.MetadataPath(), hub.MetadataHandler())
//
// The metadata path is the hub path after
// /.well-known/oauth-protected-resource, at the root of the host (RFC
// 9728 section 3.1), outside any prefix: register it on the router that
// sees full paths.
//
// Whatever a router hands the hub (a chi Mount or a gorilla PathPrefix
// hands it every path below its own), the hub serves its endpoint and
// its sub-routes only right after where it is mounted, as the request
// line names it: the hub path, with any part that [http.StripPrefix]
// removed in the application counted back in, or a path that
// [Hub.MountUnder] or [Hub.MountAt] declared. A path that merely ends
// like one of them (/api/realtime/.well-known/mercure/x/.well-known/mercure/subscriptions)
// gets 404, so a middleware that guards the hub's paths cannot be
// walked around.
func (h *Hub) Mount(mux Mux) {
	h.mount(mux, "")
}

// MountUnder is [Hub.Mount] for a router reached under prefix, a leading
// part of the hub path: a chi router in r.Route(prefix, …) or
// r.Mount(prefix, …), or an [http.ServeMux] behind
// http.StripPrefix(prefix, …) or a proxy that strips prefix. It registers the
// hub's routes with prefix removed from their patterns; a route outside
// prefix, the metadata path usually, is not registered: register it on
// the root router. The hub path without prefix becomes one of the paths
// the hub serves at (for the proxy, which leaves no trace in the request).
// The error, when prefix is not a leading part of the
// hub path ending before one of its slashes, wraps [ErrInvalidOption].
func (h *Hub) MountUnder(mux Mux, prefix string) error {
	if prefix != "" && (!strings.HasPrefix(h.path, prefix) || len(prefix) == len(h.path) || h.path[len(prefix)] != '/' || strings.HasSuffix(prefix, "/")) {
		return fmt.Errorf("%w: mount prefix %q is not a leading part of the hub path %q", ErrInvalidOption, prefix, h.path)
	}
	h.mount(mux, prefix)
	return nil
}

// MountAt is [Hub.Mount] for an application behind a reverse proxy that
// rewrites the hub path into path, an absolute escaped path (adding a
// prefix in front, say: /internal/api/realtime/.well-known/mercure): it
// registers the hub's routes at path on mux, and the hub serves there
// too. The metadata path is not registered: register it where the proxy
// maps it. The error, when path is not absolute, ends with a slash or
// does not parse, wraps [ErrInvalidOption].
func (h *Hub) MountAt(mux Mux, path string) error {
	if _, err := url.ParseRequestURI(path); err != nil || path[0] != '/' || (path != "/" && strings.HasSuffix(path, "/")) || strings.ContainsAny(path, "?#") {
		return fmt.Errorf("%w: mount path %q is not an absolute path without a trailing slash", ErrInvalidOption, path)
	}
	h.mountAt(mux, path)
	return nil
}

func (h *Hub) mount(mux Mux, prefix string) {
	h.mountAt(mux, strings.TrimPrefix(h.path, prefix))
	if m := h.MetadataPath(); prefix == "" || strings.HasPrefix(m, prefix+"/") {
		mux.Handle(strings.TrimPrefix(m, prefix), h.MetadataHandler())
	}
}

// mountAt registers the hub's routes on mux at rel, and makes rel one of
// the paths the hub serves at.
func (h *Hub) mountAt(mux Mux, rel string) {
	h.addMount(rel)
	mux.Handle(rel, h)
	if h.cfg.subscriptions {
		api := rel + "/subscriptions"
		if rel == "/" {
			api = "/subscriptions"
		}
		mux.Handle(api, h)
		mux.Handle(api+"/{type}/{topic}", h)
		mux.Handle(api+"/{type}/{topic}/{subscriber}", h)
	}
	if h.debug != nil {
		h.mountDebugger(mux, rel)
	}
}
