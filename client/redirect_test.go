package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/mercurekit/mercure/client"
	"github.com/mercurekit/mercure/internal/testwait"
)

// secretToken is the token the tests watch for on servers that must never
// see it.
const secretToken = "s3cret-token"

// origin is a server the tests redirect through: it answers the paths it
// was told to redirect with 307, serves an event stream (or, to a POST,
// an id) on any other path, and records the Authorization header of every
// request it gets.
type origin struct {
	srv       *httptest.Server
	mu        sync.Mutex
	redirects map[string]string   // path → Location
	auth      map[string][]string // path → the Authorization headers received
}

func newOrigin(t *testing.T, tls bool) *origin {
	t.Helper()
	o := &origin{redirects: map[string]string{}, auth: map[string][]string{}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		o.mu.Lock()
		o.auth[r.URL.Path] = append(o.auth[r.URL.Path], r.Header.Get("Authorization"))
		loc, redirect := o.redirects[r.URL.Path]
		o.mu.Unlock()
		switch {
		case redirect:
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusTemporaryRedirect)
		case r.Method == http.MethodPost:
			io.WriteString(w, "urn:published")
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: %s\ndata: ok\n\n", r.URL.Path)
		}
	})
	if tls {
		o.srv = httptest.NewTLSServer(handler)
	} else {
		o.srv = httptest.NewServer(handler)
	}
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) url(path string) string { return o.srv.URL + path }

func (o *origin) redirect(path, location string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.redirects[path] = location
}

// received returns the Authorization headers of the requests for path.
func (o *origin) received(path string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.auth[path])
}

// requests counts every request the origin got.
func (o *origin) requests() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, a := range o.auth {
		n += len(a)
	}
	return n
}

// namedClient resolves the host:port names of hosts to the origins'
// listeners, so that tests can use host names (subdomains, implicit
// ports) that all lead to 127.0.0.1.
func namedClient(t *testing.T, hosts map[string]*origin) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		o, ok := hosts[addr]
		if !ok {
			return nil, fmt.Errorf("no test server for %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, o.srv.Listener.Addr().String())
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// firstEvent subscribes and returns the first event, or the error the
// subscription ends with.
func firstEvent(t *testing.T, c *client.Client, hubURL string) (client.Event, error) {
	t.Helper()
	ctx := testContext(t, testwait.Deadline)
	for ev, err := range c.Subscribe(ctx, hubURL, client.Subscription{Matchers: []client.Matcher{client.Wildcard()}}) {
		return ev, err
	}
	t.Fatalf("the subscription ended without an event: %v", context.Cause(ctx))
	return client.Event{}, nil
}

// The token goes to the hub's origin and to no other: a redirect to
// another port, host, subdomain or scheme is followed without it, and
// once a hop left the origin it does not come back, even to the origin.
// Each case shows the token reaching the hub, so that a token never sent
// cannot pass for a token withheld.
func TestSubscribe_RedirectKeepsTheTokenInItsOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup wires the redirects and returns the hub URL, the path of
		// the hop that must (or must not) get the token, where it lands,
		// and the client to use.
		setup    func(t *testing.T, hub, other *origin) (hubURL string, landing *origin, path string, hc *http.Client)
		withAuth bool
	}{
		{"same origin, another path", func(t *testing.T, hub, _ *origin) (string, *origin, string, *http.Client) {
			hub.redirect("/hub", "/moved")
			return hub.url("/hub"), hub, "/moved", nil
		}, true},
		{"same origin, default port spelled out", func(t *testing.T, hub, _ *origin) (string, *origin, string, *http.Client) {
			// (net/http itself drops the token when the host name's
			// case changes: stricter than needed, and left so.)
			hub.redirect("/hub", "HTTP://hub.example:80/moved")
			return "http://hub.example/hub", hub, "/moved", namedClient(t, map[string]*origin{"hub.example:80": hub})
		}, true},
		{"another port of the same host", func(t *testing.T, hub, other *origin) (string, *origin, string, *http.Client) {
			hub.redirect("/hub", other.url("/moved")) // both on 127.0.0.1
			return hub.url("/hub"), other, "/moved", nil
		}, false},
		{"another host", func(t *testing.T, hub, other *origin) (string, *origin, string, *http.Client) {
			_, port, _ := net.SplitHostPort(other.srv.Listener.Addr().String())
			hub.redirect("/hub", "http://localhost:"+port+"/moved")
			return hub.url("/hub"), other, "/moved", nil
		}, false},
		{"a subdomain", func(t *testing.T, hub, other *origin) (string, *origin, string, *http.Client) {
			hub.redirect("/hub", "http://evil.hub.example/moved")
			return "http://hub.example/hub", other, "/moved", namedClient(t, map[string]*origin{"hub.example:80": hub, "evil.hub.example:80": other})
		}, false},
		{"back to the hub after another origin", func(t *testing.T, hub, other *origin) (string, *origin, string, *http.Client) {
			hub.redirect("/hub", other.url("/bounce"))
			other.redirect("/bounce", hub.url("/back"))
			return hub.url("/hub"), hub, "/back", nil
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hub, other := newOrigin(t, false), newOrigin(t, false)
			hubURL, landing, path, hc := tc.setup(t, hub, other)
			c := &client.Client{Token: client.StaticToken(secretToken), HTTPClient: hc}
			ev, err := firstEvent(t, c, hubURL)
			if err != nil || ev.ID != path {
				t.Fatalf("got %+v, %v; want the event of %s", ev, err, path)
			}
			if got := hub.received("/hub"); !slices.Equal(got, []string{"Bearer " + secretToken}) {
				t.Fatalf("the hub got Authorization %q", got)
			}
			want := ""
			if tc.withAuth {
				want = "Bearer " + secretToken
			}
			if got := landing.received(path); !slices.Equal(got, []string{want}) {
				t.Fatalf("%s got Authorization %q, want %q", path, got, want)
			}
		})
	}
}

// A redirect from https to http is refused before any request goes out
// in clear text: the subscription ends with ErrInsecureRedirect, and the
// http server never hears from the client. Discovery refuses it too: a
// resource reached in clear text could name any hub.
func TestRedirectFromHTTPSToHTTPIsRefused(t *testing.T) {
	t.Parallel()
	hub, plain := newOrigin(t, true), newOrigin(t, false)
	hub.redirect("/hub", plain.url("/stream"))
	hub.redirect("/resource", plain.url("/resource"))
	hub.redirect("/publish", plain.url("/publish"))
	c := &client.Client{Token: client.StaticToken(secretToken), HTTPClient: hub.srv.Client()}

	if _, err := firstEvent(t, c, hub.url("/hub")); !errors.Is(err, client.ErrInsecureRedirect) {
		t.Errorf("Subscribe: %v, want ErrInsecureRedirect", err)
	}
	ctx := testContext(t, testwait.Deadline)
	if _, err := c.Discover(ctx, hub.url("/resource")); !errors.Is(err, client.ErrInsecureRedirect) {
		t.Errorf("Discover: %v, want ErrInsecureRedirect", err)
	}
	if _, err := c.Publish(ctx, hub.url("/publish"), client.Update{Topics: []string{"t"}}); !errors.Is(err, client.ErrInsecureRedirect) {
		t.Errorf("Publish: %v, want ErrInsecureRedirect", err)
	}
	if n := plain.requests(); n != 0 {
		t.Fatalf("the http server got %d requests", n)
	}
	if got := hub.received("/hub"); !slices.Equal(got, []string{"Bearer " + secretToken}) {
		t.Fatalf("the hub got Authorization %q", got)
	}
}

// A publication that a hub redirects, body and all (307), to another
// origin is not sent there: the body may hold a private update (issue 41).
// A 307 within the hub's origin is followed, token and body included.
func TestPublish_RedirectToAnotherOriginIsRefused(t *testing.T) {
	t.Parallel()
	hub, other := newOrigin(t, false), newOrigin(t, false)
	hub.redirect("/hub", other.url("/publish"))
	hub.redirect("/moved", hub.url("/publish"))
	c := &client.Client{Token: client.StaticToken(secretToken)}
	ctx := testContext(t, testwait.Deadline)
	update := client.Update{Topics: []string{"t"}, Data: "secret", Private: true}
	if id, err := c.Publish(ctx, hub.url("/hub"), update); !errors.Is(err, client.ErrRedirectBody) {
		t.Fatalf("Publish redirected to another origin = %q, %v; want ErrRedirectBody", id, err)
	}
	if n := other.requests(); n != 0 {
		t.Fatalf("the other origin got %d requests", n)
	}
	if id, err := c.Publish(ctx, hub.url("/moved"), update); err != nil || id != "urn:published" {
		t.Fatalf("Publish redirected within its origin = %q, %v", id, err)
	}
	if got := hub.received("/publish"); !slices.Equal(got, []string{"Bearer " + secretToken}) {
		t.Fatalf("the hub's new address got Authorization %q", got)
	}
}

// A subscription sent with QUERY holds its matchers in the body: a
// redirect to another origin is refused as a publication's is.
func TestSubscribe_QueryRedirectToAnotherOriginIsRefused(t *testing.T) {
	t.Parallel()
	hub, other := newOrigin(t, false), newOrigin(t, false)
	hub.redirect("/hub", other.url("/stream"))
	c := &client.Client{}
	ctx := testContext(t, testwait.Deadline)
	for _, err := range c.Subscribe(ctx, hub.url("/hub"), client.Subscription{Matchers: []client.Matcher{client.Exact("urn:a")}, Method: "QUERY"}) {
		if !errors.Is(err, client.ErrRedirectBody) {
			t.Fatalf("QUERY subscription redirected to another origin: %v, want ErrRedirectBody", err)
		}
		break
	}
	if n := other.requests(); n != 0 {
		t.Fatalf("the other origin got %d requests", n)
	}
}

// The HTTPClient's own CheckRedirect still decides after the client's
// policy: here it stops at the first redirect, which ends the
// subscription with the 307 it got.
func TestSubscribe_HTTPClientRedirectPolicyStillApplies(t *testing.T) {
	t.Parallel()
	hub, other := newOrigin(t, false), newOrigin(t, false)
	hub.redirect("/hub", other.url("/stream"))
	var asked []string
	hc := &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		asked = append(asked, req.URL.Path+" "+req.Header.Get("Authorization"))
		return http.ErrUseLastResponse
	}}
	_, err := firstEvent(t, &client.Client{Token: client.StaticToken(secretToken), HTTPClient: hc}, hub.url("/hub"))
	var se *client.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("got %v, want the 307", err)
	}
	// It saw the redirect already stripped of the token.
	if !slices.Equal(asked, []string{"/stream "}) || other.requests() != 0 {
		t.Fatalf("CheckRedirect saw %q; the other origin got %d requests", asked, other.requests())
	}
}

// Evidence for the redirect policy: net/http alone (Go 1.25 and 1.26)
// sends the Authorization header to another port of the same host and
// from https to http, since it compares host names only. This test passes
// while that holds; if it fails, net/http changed.
func TestNetHTTP_ForwardsAuthorizationAcrossPortsAndSchemes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		hubTLS bool
	}{{"another port", false}, {"https to http", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hub, other := newOrigin(t, tc.hubTLS), newOrigin(t, false)
			hub.redirect("/hub", other.url("/stream"))
			req, err := http.NewRequestWithContext(testContext(t, testwait.Deadline), http.MethodGet, hub.url("/hub"), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+secretToken)
			res, err := hub.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if got := other.received("/stream"); !slices.Equal(got, []string{"Bearer " + secretToken}) {
				t.Fatalf("net/http forwarded %q: has it changed?", got)
			}
		})
	}
}
