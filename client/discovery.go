package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Link is one link of a Link header (RFC 8288): a target and its
// attributes.
type Link struct {
	// URL is the target, resolved against the response's URL.
	URL string
	// Rel holds the relation types, lowercased.
	Rel []string
	// Params holds the other target attributes, names lowercased; the
	// first occurrence of a name wins.
	Params map[string]string
}

// ParseLinks parses the values of Link headers; relative targets are
// resolved against base when it is not nil. Malformed links are skipped.
func ParseLinks(values []string, base *url.URL) []Link {
	var out []Link
	for _, v := range values {
		p := &lexer{s: v}
		for {
			p.skipSpaceAndCommas()
			if p.done() {
				break
			}
			if p.peek() != '<' {
				p.skipTo(',')
				continue
			}
			end := strings.IndexByte(p.s[p.i:], '>')
			if end < 0 {
				break
			}
			target := p.s[p.i+1 : p.i+end]
			p.i += end + 1
			l := Link{Params: map[string]string{}}
			rel, hasRel := "", false
			for {
				p.skipSpace()
				if p.peek() != ';' {
					break
				}
				p.i++
				p.skipSpace()
				name := strings.ToLower(p.token())
				p.skipSpace()
				val := ""
				if p.peek() == '=' {
					p.i++
					p.skipSpace()
					if p.peek() == '"' {
						val, _ = p.quoted()
					} else {
						val = p.token()
					}
				}
				if name == "" {
					p.skipTo(',')
					break
				}
				if name == "rel" {
					if !hasRel { // RFC 8288 section 3.3: only the first rel counts
						rel, hasRel = val, true
					}
					continue
				}
				if _, dup := l.Params[name]; !dup {
					l.Params[name] = val
				}
			}
			p.skipTo(',')
			l.Rel = strings.Fields(strings.ToLower(rel))
			u, err := url.Parse(strings.TrimSpace(target))
			if err != nil {
				continue
			}
			if base != nil {
				u = base.ResolveReference(u)
			}
			l.URL = u.String()
			out = append(out, l)
		}
	}
	return out
}

// has reports whether l has the relation type rel.
func (l Link) has(rel string) bool {
	for _, r := range l.Rel {
		if r == rel {
			return true
		}
	}
	return false
}

// HubLink is a hub advertised by a resource: Link rel="mercure" and its
// attributes (the spec's discovery section).
type HubLink struct {
	// URL is the hub's URL.
	URL string
	// LastEventID is the last-event-id attribute: the last event at the
	// time the resource was produced. Subscribe with it to miss nothing
	// between the resource and the subscription. Empty when absent.
	LastEventID string
	// Type is the type attribute, the SSE type of the updates; empty when
	// absent (then "message").
	Type string
	// ContentType is the content-type attribute, the media type of the
	// updates' data; empty when absent (then the resource's own).
	ContentType string
}

// Discovery is what a resource advertises about its updates.
type Discovery struct {
	// Hubs are the advertised hubs, in header order; a publisher publishes
	// to each, a subscriber picks one it trusts. The resource names them:
	// check a hub's URL before you send it a token (see
	// [Discovery.Subscription]).
	Hubs []HubLink
	// Topic is the canonical topic: the rel="self" link, or else the
	// resource's URL.
	Topic string

	// resource is the URL of the resource, nil when unknown.
	resource *url.URL
}

// ErrNoHub is returned by discovery when the resource advertises no hub.
var ErrNoHub = errors.New("mercure: the resource advertises no hub")

// DiscoverResponse reads the discovery links of a resource's response;
// use it when the application fetches the resource itself, so that the
// cursor matches the representation it read.
func DiscoverResponse(res *http.Response) (*Discovery, error) {
	var base *url.URL
	if res.Request != nil {
		base = res.Request.URL
	}
	d := &Discovery{resource: base}
	for _, l := range ParseLinks(res.Header.Values("Link"), base) {
		switch {
		case l.has("mercure"):
			d.Hubs = append(d.Hubs, HubLink{URL: l.URL, LastEventID: l.Params["last-event-id"], Type: l.Params["type"], ContentType: l.Params["content-type"]})
		case l.has("self") && d.Topic == "":
			d.Topic = l.URL
		}
	}
	if d.Topic == "" && base != nil {
		d.Topic = base.String()
	}
	if len(d.Hubs) == 0 {
		return d, ErrNoHub
	}
	return d, nil
}

// Discover fetches the resource at resourceURL with GET and reads its
// discovery links (see [DiscoverResponse]). The client's Token is not
// sent: it is meant for the hub; authenticate to the resource with
// HTTPClient (a cookie jar, say).
func (c *Client) Discover(ctx context.Context, resourceURL string) (*Discovery, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, resourceURL, nil)
	if err != nil {
		return nil, fmt.Errorf("mercure: discover: %w", err)
	}
	res, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 != 2 {
		return nil, newStatusError(req, res)
	}
	return DiscoverResponse(res)
}

// Subscription returns the subscription to the resource's topic through
// its first hub, starting from the advertised cursor.
//
// The resource chose the hub, so [Client.Subscribe] holds it to the rules
// that a redirect is held to: it refuses, with [ErrUntrustedHub], a hub
// on http named by a resource on https (the stream would travel in
// clear text), and, when the client has a Token, a hub on another origin
// than the resource's (the token would go wherever the resource says).
// To subscribe to a hub of another origin with a token, check its URL,
// then subscribe to it with a Subscription of your own.
func (d *Discovery) Subscription() (hubURL string, s Subscription) {
	s.Matchers = []Matcher{Exact(d.Topic)}
	if len(d.Hubs) > 0 {
		hubURL, s.LastEventID = d.Hubs[0].URL, d.Hubs[0].LastEventID
	}
	s.resource = d.resource
	return hubURL, s
}

// ErrUntrustedHub is wrapped by the error of a subscription that
// [Discovery.Subscription] returned, to a hub that the resource could
// not make the client trust: a hub on http named by a resource on https,
// or, for a client with a Token, a hub on another origin than the
// resource's. The subscription ends with it.
var ErrUntrustedHub = errors.New("mercure: refusing a hub that the resource names")

// checkDiscovered tells why the client must not subscribe to the hub at
// hub for a subscription discovered on resource, if it must not.
func (c *Client) checkDiscovered(resource, hub *url.URL) error {
	if resource == nil {
		return nil
	}
	if strings.EqualFold(resource.Scheme, "https") && !strings.EqualFold(hub.Scheme, "https") {
		return fmt.Errorf("%w: %s, on %s, named by %s", ErrUntrustedHub, redact(hub.String()), hub.Scheme, redact(resource.String()))
	}
	if c.Token != nil && origin(hub) != origin(resource) {
		return fmt.Errorf("%w: %s would get the client's token, and is not on the origin of %s that names it", ErrUntrustedHub, redact(hub.String()), redact(resource.String()))
	}
	return nil
}

// Metadata is a hub's OAuth 2.0 protected resource metadata (RFC 9728),
// with the members the spec's discovery section adds.
type Metadata struct {
	Resource                           string   `json:"resource"`
	AuthorizationServers               []string `json:"authorization_servers,omitempty"`
	AuthorizationDetailsTypesSupported []string `json:"authorization_details_types_supported,omitempty"`
	BearerMethodsSupported             []string `json:"bearer_methods_supported,omitempty"`
	// Cookie is the name of the cookie the hub reads the token from.
	Cookie string `json:"mercure_cookie,omitempty"`
	// MatcherTypes lists the matcher types; empty means exact and
	// urlpattern.
	MatcherTypes []string `json:"mercure_matcher_types_supported,omitempty"`
	// Subscriptions says whether the hub serves subscription events.
	Subscriptions bool `json:"mercure_subscriptions,omitempty"`
}

// ErrMetadataMismatch is returned when metadata names another resource
// than the hub it was fetched for (RFC 9728 section 3.3).
var ErrMetadataMismatch = errors.New("mercure: the metadata is about another resource")

// MetadataURL returns where the metadata of the hub at hubURL lives: the
// hub URL with /.well-known/oauth-protected-resource inserted before its
// path (RFC 9728 section 3.1).
func MetadataURL(hubURL string) (string, error) {
	u, err := url.Parse(hubURL)
	if err != nil || !u.IsAbs() {
		return "", fmt.Errorf("mercure: hub URL %q is not absolute", hubURL)
	}
	u.Path = "/.well-known/oauth-protected-resource" + u.Path
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String(), nil
}

// Metadata fetches the protected resource metadata of the hub whose
// public URL (its resource identifier) is hubURL, from metadataURL (from
// [MetadataURL], or a challenge's resource_metadata), and checks that it
// is about hubURL.
func (c *Client) Metadata(ctx context.Context, hubURL, metadataURL string) (*Metadata, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metadataURL, nil)
	if err != nil {
		return nil, fmt.Errorf("mercure: metadata: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, newStatusError(req, res)
	}
	var m Metadata
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&m); err != nil {
		return nil, fmt.Errorf("mercure: metadata: %w", err)
	}
	if m.Resource != hubURL {
		return nil, fmt.Errorf("%w: %q, not %q", ErrMetadataMismatch, m.Resource, hubURL)
	}
	return &m, nil
}
