package mercure

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Routing. The hub URL is the hub's identity; the path a request reaches
// it at is the application's business: a router may hand the hub the full
// path, a path with a leading part stripped (http.StripPrefix, a reverse
// proxy) or with a prefix added in front (a proxy mapping the public path
// under an internal one). The hub therefore recognizes its routes by how
// the request path ends, segment by segment, compared with the hub path.
// Whatever reaches the hub has been routed to it by the application's
// router, which decides which paths that is: the hub only tells its own
// routes apart, and answers the rest with a diagnostic.

// routeKind is what a request path names, relative to the hub.
type routeKind int

const (
	routeOther    routeKind = iota // none of the hub's routes
	routeHub                       // the hub endpoint
	routeAPI                       // the subscriptions API
	routeAPIOther                  // under the subscriptions API, but no resource of it
	routeDebug                     // the debugger (WithDebugger), under hub path + /debug
)

// route tells what the escaped request path p names; for routeAPI, api
// holds the escaped segments after "subscriptions" (none, two or three),
// for routeDebug those after "debug". A path names the hub endpoint when
// it is empty or "/" (the whole hub path stripped) or when its segments
// and the hub path's agree up to the shorter of the two
// ([Hub.reachedAt]); it names the subscriptions API when it is such a
// path followed by /subscriptions and up to three segments, and, with
// the debugger on, the debugger when it is such a path followed by
// /debug. Among several readings, the shortest mount path wins. The cost
// is linear in the number of segments, whatever they are.
func (h *Hub) route(p string) (kind routeKind, api []string) {
	segs := strings.Split(p, "/")
	if h.reachedAt(segs) {
		return routeHub, nil
	}
	kind = routeOther
	for k, seg := range segs {
		if (seg != "subscriptions" && (seg != "debug" || h.debug == nil)) || !h.reachedAt(segs[:k]) {
			continue
		}
		rest := segs[k+1:]
		if seg == "debug" {
			return routeDebug, rest
		}
		switch {
		case len(rest) == 0,
			(len(rest) == 2 || len(rest) == 3) && (rest[0] == MatchExact || rest[0] == MatchURLPattern):
			return routeAPI, rest
		}
		kind = routeAPIOther
	}
	return kind, nil
}

// reachedAt tells whether the escaped path made of segs (split at its
// slashes) is where the hub endpoint can be reached: "" or "/" (what
// stripping the whole hub path leaves), or a path whose segments,
// decoded, agree with the hub path's from the last one back to the first
// of the shorter of the two. So with the hub path
// /api/realtime/.well-known/mercure, these do:
//
//	/api/realtime/.well-known/mercure          (the full path)
//	/.well-known/mercure                       (/api/realtime stripped)
//	/internal/api/realtime/.well-known/mercure (a prefix in front)
//
// A hub whose path is "/" is reached at "/" or "" only. It compares at
// most as many segments as the hub path has.
func (h *Hub) reachedAt(segs []string) bool {
	switch {
	case len(segs) == 0, len(segs) == 1 && segs[0] == "": // ""
		return true
	case len(segs) == 2 && segs[0] == "" && segs[1] == "": // "/"
		return true
	case segs[0] != "": // a relative path
		return false
	}
	segs = segs[1:]
	n := min(len(segs), len(h.segs))
	if n == 0 {
		return false
	}
	for i := 1; i <= n; i++ {
		v, err := url.PathUnescape(segs[len(segs)-i])
		if err != nil || v != h.segs[len(h.segs)-i] {
			return false
		}
	}
	return true
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
	p := r.URL.EscapedPath()
	if kind == routeAPI || kind == routeAPIOther { // WithSubscriptions is off
		if h.warnedAPIOff.CompareAndSwap(false, true) {
			h.log.Warn("mercure: a request for the subscriptions API reached the hub, which serves it only with WithSubscriptions (logged once)", "path", p)
		}
		writeProblem(w, http.StatusNotFound, "this hub does not serve the subscriptions API; got "+quote(p))
		return
	}
	serves := h.path
	if h.cfg.subscriptions {
		serves += " and " + h.path + "/subscriptions[/{type}/{topic}[/{subscriber}]]"
	}
	if h.debug != nil {
		serves += " and " + h.path + "/debug/"
	}
	if h.warnedRoute.CompareAndSwap(false, true) {
		h.log.Warn("mercure: a request reached the hub at a path it does not serve: is the router stripping a prefix that is not a leading part of the hub path, or routing another path to the hub? (logged once)",
			"path", p, "serves", serves)
	}
	writeProblem(w, http.StatusNotFound, fmt.Sprintf(
		"this hub serves %s, at that path, behind a prefix or with a leading part stripped; got %s", serves, quote(p)))
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
// router that is reached under a prefix, use [Hub.MountUnder].
//
// The hub also serves wherever an application routes it otherwise (see
// [Hub.ServeHTTP]); the recipes, for the hub URL
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
// The hub path is matched by its ending (see [Hub.ServeHTTP]): a router
// that hands the hub more paths than its own (a catch-all, a gorilla
// PathPrefix) makes it serve there too. That grants nothing: the hub URL,
// not the request path, decides the audience of tokens, the ids the
// subscriptions API authorizes against and the path of the hub's cookie.
func (h *Hub) Mount(mux Mux) {
	h.mount(mux, "")
}

// MountUnder is [Hub.Mount] for a router reached under prefix, a leading
// part of the hub path: a chi router in r.Route(prefix, …) or
// r.Mount(prefix, …), or an [http.ServeMux] behind
// http.StripPrefix(prefix, …) or a proxy that strips prefix. It registers the
// hub's routes with prefix removed from their patterns; a route outside
// prefix, the metadata path usually, is not registered: register it on
// the root router. The error, when prefix is not a leading part of the
// hub path ending before one of its slashes, wraps [ErrInvalidOption].
func (h *Hub) MountUnder(mux Mux, prefix string) error {
	if prefix != "" && (!strings.HasPrefix(h.path, prefix) || len(prefix) == len(h.path) || h.path[len(prefix)] != '/' || strings.HasSuffix(prefix, "/")) {
		return fmt.Errorf("%w: mount prefix %q is not a leading part of the hub path %q", ErrInvalidOption, prefix, h.path)
	}
	h.mount(mux, prefix)
	return nil
}

func (h *Hub) mount(mux Mux, prefix string) {
	rel := strings.TrimPrefix(h.path, prefix)
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
	if m := h.MetadataPath(); prefix == "" || strings.HasPrefix(m, prefix+"/") {
		mux.Handle(strings.TrimPrefix(m, prefix), h.MetadataHandler())
	}
}
