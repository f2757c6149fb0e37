package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ErrInsecureRedirect is wrapped by the error of a request that a hub or
// resource redirected from https to http: the client refuses to follow,
// since the request, its Last-Event-ID and a discovered hub URL would
// then travel in clear text, open to anyone on the path. A subscription
// ends with it.
var ErrInsecureRedirect = errors.New("mercure: refusing a redirect from https to http")

// ErrRedirectBody is wrapped by the error of a request with a body (a
// publication, a subscription sent with QUERY) that a hub redirected to
// another origin with 307 or 308, which would send the body again there:
// the client refuses to follow, since the body may hold a private update.
var ErrRedirectBody = errors.New("mercure: refusing to send a request body to another origin on a redirect")

// errTooManyRedirects is net/http's default limit, applied when the
// HTTPClient has no CheckRedirect of its own.
var errTooManyRedirects = errors.New("mercure: stopped after 10 redirects")

// checkRedirect wraps next, the HTTPClient's own policy (nil for net/http's
// default), with the client's: a redirect from https to http is refused,
// so is one that would send a request body to another origin than the
// first request's, and the Authorization header the client set is
// dropped as soon as a hop leaves that origin, for the rest of the chain.
//
// net/http alone drops Authorization only when the host name changes to
// one that is not a subdomain: it still sends the token to another port
// of the same host, to a subdomain, and over http after https.
func checkRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		for _, prev := range via {
			if prev.URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: %s to %s", ErrInsecureRedirect, redact(prev.URL.String()), redact(req.URL.String()))
			}
		}
		first := origin(via[0].URL)
		for _, hop := range append(via[1:len(via):len(via)], req) {
			if origin(hop.URL) != first {
				if req.GetBody != nil && req.ContentLength != 0 {
					// A 307 or 308 sends the body again (a 301, 302 or
					// 303 turns the request into a GET without one).
					return fmt.Errorf("%w: %s to %s", ErrRedirectBody, redact(via[0].URL.String()), redact(req.URL.String()))
				}
				req.Header.Del("Authorization")
				break
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errTooManyRedirects
		}
		return nil
	}
}

// origin is u's origin (RFC 6454): scheme, host and port, the host
// lowercased and the port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// httpClient is the HTTPClient (or http.DefaultClient) under the client's
// redirect policy: a shallow copy, sharing its Transport and Jar.
func (c *Client) httpClient() *http.Client {
	base := c.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	hc := *base
	hc.CheckRedirect = checkRedirect(base.CheckRedirect)
	return &hc
}
