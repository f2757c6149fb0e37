package mercure

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mercurekit/mercure/internal/chars"
	"github.com/mercurekit/mercure/internal/token"
)

// A LinkOption adds a target attribute to the Link header written by
// [Hub.Link] (spec §Discovery: Hub Discovery). Like an [Option], it
// validates its argument: a bad value makes Link fail.
type LinkOption func(*link) error

// link is the Link header value that LinkOptions add attributes to.
type link struct {
	hub   *Hub
	attrs []string
}

// LinkLastEventID adds last-event-id with the id of the last update the hub
// dispatched (or earliest): a client that forwards it as last_event_id
// misses no update published between the response and its subscription.
func LinkLastEventID() LinkOption {
	return func(l *link) error {
		l.attrs = append(l.attrs, "last-event-id="+quote(l.hub.LastEventID()))
		return nil
	}
}

// LinkType adds type, the SSE event type of the updates about the
// resource; leave it out when they mix types. It follows the rules of the
// publish type field, and an application's resource may not use "mercure".
func LinkType(eventType string) LinkOption {
	return func(l *link) error {
		if eventType == "" || !chars.Valid(eventType) || eventType == "mercure" {
			return fmt.Errorf("%w: Link type %q", ErrInvalidType, eventType)
		}
		l.attrs = append(l.attrs, "type="+quote(eventType))
		return nil
	}
}

// LinkContentType adds content-type, the media type of the updates'
// data (e.g. application/merge-patch+json), when it differs from the
// resource's own; leave it out when updates mix media types.
func LinkContentType(mediaType string) LinkOption {
	return func(l *link) error {
		if mediaType == "" || !chars.Valid(mediaType) {
			return fmt.Errorf("%w: Link content-type %q", ErrInvalidOption, mediaType)
		}
		l.attrs = append(l.attrs, "content-type="+quote(mediaType))
		return nil
	}
}

// Link adds to header the discovery link of the hub (spec §Discovery: Hub
// Discovery):
//
//	Link: <https://example.com/.well-known/mercure>; rel="mercure"
//
// with the attributes opts add, values quoted. Applications send
// it on the responses of resources whose updates the hub pushes. Nothing
// is added when an option is invalid.
func (h *Hub) Link(header http.Header, opts ...LinkOption) error {
	l := link{hub: h, attrs: []string{`rel="mercure"`}}
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil LinkOption", ErrInvalidOption)
		}
		if err := o(&l); err != nil {
			return err
		}
	}
	header.Add("Link", "<"+h.url+">; "+strings.Join(l.attrs, "; "))
	return nil
}

// SelfLink adds to header the link naming the canonical topic of the
// resource (spec §Discovery: Topic Discovery):
//
//	Link: <https://example.com/books/1>; rel="self"
//
// Characters that cannot appear in a URI reference are percent-encoded.
func SelfLink(header http.Header, topic string) {
	header.Add("Link", "<"+uriReference(topic)+`>; rel="self"`)
}

// quote writes s as an RFC 9110 quoted string: ids chosen by publishers
// may hold quotes and backslashes (DIS-4).
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// uriReference percent-encodes the bytes of s that a URI reference cannot
// hold (controls, space, non-ASCII, and the delimiters of the Link syntax),
// so that the value stays one link target.
func uriReference(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7F || strings.IndexByte(`<>"{}|\^`+"`", c) >= 0 {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// MetadataURL returns the URL of the hub's OAuth 2.0 protected resource
// metadata (RFC 9728; spec §Discovery: Protected Resource Metadata): the hub
// URL with /.well-known/oauth-protected-resource inserted before its path.
// It lies outside the hub's path: mount [Hub.MetadataHandler] there.
func (h *Hub) MetadataURL() string {
	u := *h.cfg.url
	u.Path = "/.well-known/oauth-protected-resource" + u.Path
	u.RawPath = ""
	return u.String()
}

// MetadataPath returns the path of [Hub.MetadataURL].
func (h *Hub) MetadataPath() string {
	return "/.well-known/oauth-protected-resource" + h.cfg.url.Path
}

// MetadataHandler serves the protected resource metadata (spec
// §Discovery: Protected Resource Metadata): the hub's resource identifier,
// the token presentations it accepts and its features (matcher types,
// the subscriptions API).
//
// A hub without an [Issuer] verifies no token, and its document says so:
// an empty bearer_methods_supported (RFC 9728 section 2: no method is
// supported), no authorization_details_types_supported and no
// mercure_cookie. It still serves one, with the resource identifier and
// the features: the spec lets clients take a hub without metadata for a
// pre-standard one, which a 404 would make them do.
func (h *Hub) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.withCORS(w, r, h.serveMetadata) })
}

func (h *Hub) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	doc := struct {
		Resource                  string   `json:"resource"`
		AuthorizationDetailsTypes []string `json:"authorization_details_types_supported,omitempty"`
		BearerMethods             []string `json:"bearer_methods_supported"` // [] says none
		Cookie                    string   `json:"mercure_cookie,omitempty"`
		MatcherTypes              []string `json:"mercure_matcher_types_supported"`
		AuthorizationServers      []string `json:"authorization_servers,omitempty"`
		Subscriptions             bool     `json:"mercure_subscriptions,omitempty"`
	}{
		Resource:      h.url, // DIS-6: the aud tokens must carry
		BearerMethods: []string{},
		MatcherTypes:  []string{MatchExact, MatchURLPattern},
		Subscriptions: h.cfg.subscriptions, // DIS-7, ACT-1
	}
	if h.verifier != nil {
		doc.AuthorizationDetailsTypes = []string{token.DetailType}
		doc.BearerMethods = []string{"header"} // never the cookie (DIS-7)
		doc.Cookie = h.cfg.cookieName
	}
	for _, iss := range h.cfg.issuers {
		if iss.AuthorizationServer {
			doc.AuthorizationServers = append(doc.AuthorizationServers, iss.ID) // DIS-7
		}
	}
	b, _ := json.Marshal(doc)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	w.Write(b)
}
