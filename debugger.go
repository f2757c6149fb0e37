package mercure

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"time"

	"github.com/mercurekit/mercure/internal/debugui"
)

// The debugger is a web page served under the hub path + "/debug/" for
// people to look at the hub: subscribe and see the events arrive, publish,
// see who is connected and what the hub is doing. Its files are embedded
// (internal/debugui): plain HTML, CSS and JavaScript modules, no build
// step, nothing fetched from elsewhere. The page holds no privilege of its
// own: it subscribes and publishes through the hub's endpoints with the
// viewer's token, cookie or session, and what it shows beyond that (the
// subscriptions API, the activity) is authorized by the protocol's rules.

// WithDebugger serves the debugger, a web page for people to look at the
// hub, at the hub path followed by /debug/: it subscribes (also from a
// link), shows the events as they arrive, publishes, lists the active
// subscriptions and charts the hub's activity. It sees only what the
// viewer's own token, cookie or session allows; the activity is shown to
// a token or session granting subscribe on the hub path followed by
// /debug/activity. Its page runs under a strict Content-Security-Policy
// and answers no other origin. docs/operations.md describes it.
func WithDebugger() Option {
	return func(c *config) error {
		c.debugger = true
		return nil
	}
}

// debugger is the state of a hub's debugger.
type debugger struct {
	index    debugAsset // the page, with the hub's settings
	activity activityLog
}

// debugAsset is one file of the page, ready to serve.
type debugAsset struct {
	body        []byte
	contentType string
	etag        string
}

func newDebugAsset(name string, body []byte) debugAsset {
	types := map[string]string{
		".html": "text/html; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
	}
	sum := sha256.Sum256(body)
	return debugAsset{body: body, contentType: types[path.Ext(name)], etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// debugAssets are the page's static files, by name; index.html is a
// template of the hub's settings, rendered per hub.
var debugAssets, debugPage = func() (map[string]debugAsset, *template.Template) {
	assets := make(map[string]debugAsset)
	entries, err := fs.ReadDir(debugui.Files, ".")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	for _, e := range entries {
		if e.Name() == "index.html" {
			continue
		}
		b, err := fs.ReadFile(debugui.Files, e.Name())
		if err != nil {
			panic(err)
		}
		assets[e.Name()] = newDebugAsset(e.Name(), b)
	}
	return assets, template.Must(template.ParseFS(debugui.Files, "index.html"))
}()

// debugCSP is the page's Content-Security-Policy: its own scripts and
// styles only, requests to its own origin only, no framing.
const debugCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// startDebugger renders the page for h and starts sampling its activity,
// until the hub shuts down.
func (h *Hub) startDebugger() *debugger {
	d := &debugger{}
	var b bytes.Buffer
	mode := "HTTP/1.1 streams taken over after their headers"
	if h.cfg.goroutineStreams {
		mode = "one goroutine per stream"
	}
	err := debugPage.Execute(&b, struct {
		HubURL, HubPath, ActivityTopic, StreamMode string
		Subscriptions, Playground                  bool
		PlaygroundTTL                              int
	}{h.url, h.path, h.activityTopic(), mode, h.cfg.subscriptions, h.cfg.playground != nil, int(playgroundTTL / time.Minute)})
	if err != nil {
		panic(err) // the template and its data are ours
	}
	d.index = newDebugAsset("index.html", b.Bytes())
	h.ops.background.Add(1) // Shutdown waits for the sampler too
	go func() {
		defer h.ops.background.Done()
		d.activity.run(h)
	}()
	if h.cfg.playground != nil {
		h.log.Warn("mercure: the debugger's playground is on: any client that reaches the hub gets a token to publish and subscribe to every topic, private updates included; for local development only",
			"page", h.url+"/debug/")
	}
	return d
}

// mountDebugger registers the debugger's paths on mux, the hub path being
// rel there.
func (h *Hub) mountDebugger(mux Mux, rel string) {
	base := rel + "/debug"
	mux.Handle(base, h)
	mux.Handle(base+"/", h)
	mux.Handle(base+"/{file}", h)
}

// serveDebugger serves r when its path is the debugger's (see [Hub.route]),
// and reports whether it was.
func (h *Hub) serveDebugger(w http.ResponseWriter, r *http.Request) bool {
	kind, rest := h.route(r)
	if kind != routeDebug {
		return false
	}
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
	switch {
	case len(rest) == 0:
		// Relative, so that it holds behind any prefix; the query keeps
		// the page's subscription.
		loc := "debug/"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		hdr.Set("Location", loc)
		w.WriteHeader(http.StatusMovedPermanently)
	case len(rest) > 1:
		writeProblem(w, http.StatusNotFound, "no such page in the debugger")
	case rest[0] == "activity":
		h.serveActivity(w, r)
	case rest[0] == "token":
		h.servePlaygroundToken(w, r)
	case rest[0] == "":
		h.serveDebugAsset(w, r, h.ops.debug.index)
	default:
		a, ok := debugAssets[rest[0]]
		if !ok {
			writeProblem(w, http.StatusNotFound, "no such page in the debugger")
			return true
		}
		h.serveDebugAsset(w, r, a)
	}
	return true
}

// serveDebugAsset serves one of the page's files; browsers revalidate
// them (ETag), so that a new release shows at once.
func (h *Hub) serveDebugAsset(w http.ResponseWriter, r *http.Request, a debugAsset) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Content-Security-Policy", debugCSP)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// activityTopic is the path on which a subscribe grant authorizes the
// activity figures.
func (h *Hub) activityTopic() string {
	return h.path + "/debug/activity"
}
