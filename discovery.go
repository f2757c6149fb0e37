package mercure

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mercurekit/mercure/internal/chars"
	"github.com/mercurekit/mercure/internal/token"
)

// Link describes the discovery links of a resource whose updates the hub
// pushes (spec §Discovery), for [Hub.Link]. The zero value links the hub
// alone.
type Link struct {
	// Topic, when set, is the resource's canonical topic: a second link,
	// <Topic>; rel="self" (spec §Discovery: Topic Discovery), with the
	// characters a URI reference cannot hold percent-encoded.
	Topic string
	// LastEventID adds last-event-id, the id of the last update the hub
	// dispatched (or earliest): a client that subscribes with it as its
	// last_event_id misses no update published between the response and
	// its subscription.
	LastEventID bool
	// Type, when set, is the SSE event type of the updates about the
	// resource; leave it out when they mix types. It follows the rules of
	// the publish type field.
	Type string
	// ContentType, when set, is the media type of the updates' data (such
	// as application/merge-patch+json) when it differs from the
	// resource's own; leave it out when updates mix media types.
	ContentType string
}

// Link adds to header the discovery links that l describes (spec
// §Discovery), values quoted:
//
//	Link: <https://example.com/.well-known/mercure>; rel="mercure"; last-event-id="urn:uuid:…"
//	Link: <https://example.com/books/1>; rel="self"
//
// Applications send them on the responses of resources whose updates the
// hub pushes. It adds nothing, and returns an error wrapping
// [ErrInvalidOption], when Type or ContentType is not valid.
func (h *Hub) Link(header http.Header, l Link) error {
	attrs := []string{`rel="mercure"`}
	if l.LastEventID {
		attrs = append(attrs, "last-event-id="+quote(h.LastEventID()))
	}
	if l.Type != "" {
		if !chars.Valid(l.Type) || l.Type == "mercure" {
			return fmt.Errorf("%w: Link type %q", ErrInvalidOption, l.Type)
		}
		attrs = append(attrs, "type="+quote(l.Type))
	}
	if l.ContentType != "" {
		if !chars.Valid(l.ContentType) {
			return fmt.Errorf("%w: Link content type %q", ErrInvalidOption, l.ContentType)
		}
		attrs = append(attrs, "content-type="+quote(l.ContentType))
	}
	header.Add("Link", "<"+h.url+">; "+strings.Join(attrs, "; "))
	if l.Topic != "" {
		header.Add("Link", "<"+uriReference(l.Topic)+`>; rel="self"`)
	}
	return nil
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

// metadataPrefix is inserted before the hub path to make its metadata
// path (RFC 9728 section 3.1).
const metadataPrefix = "/.well-known/oauth-protected-resource"

// metadataURL returns the URL of the hub's OAuth 2.0 protected resource
// metadata (RFC 9728; spec §Discovery: Protected Resource Metadata): the
// hub URL with /.well-known/oauth-protected-resource inserted before its
// path.
func (h *Hub) metadataURL() string {
	u := *h.cfg.url
	u.Path = metadataPrefix + u.Path
	u.RawPath = ""
	return u.String()
}

// MetadataPath returns the path of the hub's protected resource metadata
// (spec §Discovery: Protected Resource Metadata), which [Hub.ServeHTTP]
// serves: /.well-known/oauth-protected-resource followed by the hub path,
// at the root of the host (RFC 9728 section 3.1), outside any prefix.
func (h *Hub) MetadataPath() string {
	return metadataPrefix + h.cfg.url.Path
}

// legacyMetadata is what the metadata says of the compatibility mode
// (WithLegacyClients): pre-standard tokens, with the legacy claim, in the
// legacy cookie or the query parameter, and the drafts' selectors.
type legacyMetadata struct {
	Cookie         string   `json:"cookie"`
	Claim          string   `json:"claim"`
	QueryParameter string   `json:"query_parameter"`
	MatcherTypes   []string `json:"matcher_types"`
}

// serveMetadata serves the protected resource metadata: the hub's
// resource identifier, the token presentations it accepts and its
// features (matcher types, the subscriptions API). A hub without an
// issuer verifies no token, and its document says so (an empty
// bearer_methods_supported, RFC 9728 section 2); it still serves one:
// the spec lets clients take a hub without metadata for a pre-standard
// one, which a 404 would make them do.
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
		// Legacy says what the compatibility mode accepts besides the
		// standard (WithLegacyClients), for the tools that look.
		Legacy *legacyMetadata `json:"mercure_legacy,omitempty"`
	}{
		Resource:      h.url, // DIS-6: the aud tokens must carry
		BearerMethods: []string{},
		MatcherTypes:  []string{MatchExact, MatchURLPattern},
		Subscriptions: h.cfg.subscriptions, // DIS-7, ACT-1
	}
	if h.auth.verifier != nil {
		doc.AuthorizationDetailsTypes = []string{token.DetailType}
		doc.BearerMethods = []string{"header"} // never the cookie (DIS-7)
		doc.Cookie = h.cfg.cookieName
	}
	if lc := h.cfg.legacy; lc != nil && (lc.PublisherKeys != nil || lc.SubscriberKeys != nil) {
		doc.Legacy = &legacyMetadata{Cookie: LegacyCookieName, Claim: "mercure", QueryParameter: "authorization",
			MatcherTypes: []string{MatchURITemplate}}
		// RFC 6750's "query": the token in the authorization parameter.
		doc.BearerMethods = append(doc.BearerMethods, "query")
		if doc.Cookie == "" {
			doc.Cookie = h.cfg.cookieName
		}
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
