// Package client is a Go client for Mercure hubs (draft-dunglas-mercure-08):
// this module's hub or any conforming one. It subscribes, resuming on its
// own, discovers hubs from resources, and publishes.
//
// # Subscribe
//
// [Client.Subscribe] returns an iterator over the events of the topics its
// matchers select ([Exact], [URLPattern], [Wildcard]); it sends them with
// GET, or with QUERY and a form body when they would not fit in a URL:
//
//	c := &client.Client{Token: client.StaticToken(tok)}
//	for ev, err := range c.Subscribe(ctx, hubURL, client.Subscription{
//		Matchers:    []client.Matcher{client.URLPattern("https://example.com/books/:id")},
//		LastEventID: cursor,
//	}) {
//		if err != nil {
//			return err // a refusal: see StatusError
//		}
//		handle(ev)
//	}
//
// An iterator rather than a callback or a channel: events are read in the
// caller's goroutine, so they are handled in order, the cursor advances only
// past events the caller received, breaking out of the loop closes the
// stream, and nothing runs in the background to leak.
//
// # Resume
//
// After a network error, a stream the hub ends, or a 5xx or 429 answer, the
// iterator reconnects with exponential backoff and jitter, honouring the
// hub's retry field and Retry-After, and sends Last-Event-ID with the id of
// the last event it yielded (the spec's "Reconnection, State
// Reconciliation and Event Sourcing" section). [Client.OnConnect] reports
// the hub's Mercure-Last-Event-ID, and [Connection.CursorLost] says when
// the hub no longer knew the cursor. To miss nothing before the first
// event, pass a cursor: one from discovery, or [Earliest].
//
// It asks for text/event-stream and application/problem+json alike: a
// hub of this module answers a browser's EventSource, refused for now
// (429, 503), with a stream that only sets its retry delay, since an
// EventSource gives up on any other status; this client gets the status,
// Retry-After and the problem document instead, and reports them to
// [Client.OnRetry] as a [*StatusError].
//
// What a hub asks for is bounded: a wait of at least
// [Client.MinReconnectDelay] before each reconnection (a retry of 0
// included), of at most [Client.MaxHubDelay] however long the
// Retry-After. A server that accepts and never answers is left after
// [Client.HeaderTimeout], and a stream silent longer than
// [Client.IdleTimeout] (hubs send keep-alive comments meanwhile) is
// dropped and resumed.
//
// A 4xx answer other than 408 and 429 ends the iteration with a
// [*StatusError], which carries the status and the parsed Bearer challenge
// (RFC 6750): errors.Is(err, [ErrUnauthorized]) and
// se.Challenge.Error == "invalid_token", for instance.
//
// # Credentials
//
// [Client.Token] is called at every connection, so a long-lived subscriber
// renews a short-lived token; wrap an oauth2.TokenSource in it:
//
//	c.Token = func(context.Context) (string, error) {
//		t, err := ts.Token()
//		if err != nil {
//			return "", err
//		}
//		return t.AccessToken, nil
//	}
//
// The token is sent to the hub's origin only: a redirect to another
// scheme, host or port goes without it, and one from https to http is
// refused ([ErrInsecureRedirect]); a request body (a publication, a QUERY
// subscription) is never sent again to another origin by a 307 or 308
// ([ErrRedirectBody]). net/http alone would send it to
// another port or a subdomain, and over http. (A client from
// golang.org/x/oauth2's NewClient as [Client.HTTPClient] would renew the
// token too, but its Transport adds it to every request, redirects to
// anywhere included.) A cookie jar in HTTPClient serves hubs that read the
// token from a cookie; cookies follow their own scope (RFC 6265: the host,
// not the port).
//
// # Discover
//
// [Client.Discover] and [DiscoverResponse] read a resource's Link headers
// (the spec's "Discovery" section): the hub, the last-event-id to subscribe
// from, the type and content-type of the updates, and the rel="self"
// topic. [Client.Metadata] reads the hub's protected resource metadata
// (RFC 9728). The resource names the hub: a subscription from
// [Discovery.Subscription] is held to what a redirect is, refused
// ([ErrUntrustedHub]) to a hub on http named by a resource on https, or
// with a token, to a hub on another origin than the resource's.
//
// # Publish
//
// [Client.Publish] sends every field of an [Update] and returns its id.
//
// # The event stream parser
//
// The package parses text/event-stream itself, following the HTML
// standard's "Interpreting an event stream", rather than with
// github.com/tmaxmax/go-sse (v0.11.0, the release pinned in go.mod), whose encoder the hub already set
// aside: its sse.Read never reports the retry field, and its Connection
// gives up on any non-200 answer (a 503 included) and, when it retries
// before the first event, drops the Last-Event-ID the caller set. The
// tests show each of these against a live server, and check this parser
// against go-sse's on fuzzed input.
package client
