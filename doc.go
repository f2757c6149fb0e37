// Package mercure embeds a complete Mercure hub (draft-dunglas-mercure-08)
// in a Go application's own process.
//
// Mercure pushes updates to browsers and other clients over Server-Sent
// Events. Publishers send updates about topics (usually the URLs of the
// resources that changed); subscribers hold one long-lived stream and
// receive the updates whose topics their matchers select. With the hub in
// the same process, the application publishes by calling a method from the
// code path that changes its state, and mounts the hub's handler on its own
// router: there is no second service to deploy, secure or reach.
//
// The protocol is specified by draft-dunglas-mercure-08
// (https://datatracker.ietf.org/doc/draft-dunglas-mercure/). This
// documentation cites its sections as (spec §Section) or
// (spec §Section: Subsection).
//
// # Example
//
//	hub, err := mercure.New("https://example.com/.well-known/mercure")
//	if err != nil {
//		log.Fatal(err)
//	}
//	mux := http.NewServeMux()
//	mux.Handle(hub.Path(), hub) // GET/QUERY subscribe, POST publish
//
//	// Anywhere in the application, after the state changed:
//	id, err := hub.Publish(ctx, mercure.Update{
//		Topics: []string{"https://example.com/books/1"},
//		Data:   `{"status":"checked out"}`,
//	})
//
// A browser then listens with
//
//	new EventSource("/.well-known/mercure?match=" + encodeURIComponent("https://example.com/books/1"))
//
// or, for every book, with the URL pattern matcher
// match_urlpattern=https://example.com/books/:id.
//
// # Routing
//
// The hub URL given to [New] is the hub's identity: the aud of its
// tokens, the base of relative topics, the ids of its subscriptions. The
// path a request reaches the hub at is the application's routing: the
// hub serves its routes only right after its path as the request line
// names it ([http.StripPrefix] may remove a leading part on the way), or
// after a path declared for a proxy that rewrites it, never at a path
// that only ends the same way. [Hub.Mount] registers the hub's routes on
// a ServeMux or a chi router, [Hub.MountUnder] on a router reached under
// a prefix, [Hub.MountAt] behind a proxy that adds one; [Hub.Mount] lists
// the recipes for net/http, chi and gorilla/mux. The protected resource
// metadata lies at the root of the host (RFC 9728 section 3.1), outside
// any prefix.
//
// # Topics and matchers
//
// An update has one canonical topic and any number of alternate topics.
// A subscriber's exact matchers compare topics byte for byte; URL pattern
// matchers follow the WHATWG URL Pattern standard, with relative patterns
// and topics resolved against the hub URL; the matcher "*" selects every
// topic. Canonicalize topics (Unicode NFC, lowercase host, one
// percent-encoding) on both sides: look-alike strings are different topics.
// A topic is an identifier, not a link: clients must check its scheme
// against an allowlist before dereferencing it, since a pattern such as
// *://* also matches javascript: and data: topics (spec §Matcher Types: URL
// Pattern).
//
// # History and reconnection
//
// The hub keeps recent updates in a store (by default in memory, the latest
// 1 000: package memstore sizes it). A client that reconnects
// with Last-Event-ID, or subscribes with last_event_id, receives the updates
// it missed before the live ones, with neither gap nor duplicate.
//
// Stores plug in with [WithStore]: package boltstore keeps history in
// a file, so that it survives restarts; packages redisstore and pgstore
// keep it in a Redis stream or in PostgreSQL tables shared by any number
// of hub instances, which then act as one hub: an update published on any
// instance reaches the subscribers of all, a client may resume on another
// instance, and the subscriptions API of each lists the subscribers of all
// (a [store.SubscriptionStore]). With pgstore, an application records an
// update in its own database transaction: subscribers get it if and only if
// the transaction commits. A store on the network reports outages to the
// hub; [Hub.Stats] shows them and [Hub.Publish] fails with [ErrStore] rather
// than wait. A publisher that got no answer may send an update with its own
// id again: every store records it once (see [store.Store.Append]). Package
// store is the contract for store authors, and storetest holds the
// behavioural tests every store must pass.
//
// # Resource limits and slow clients
//
// Every cost a client can make the hub pay is bounded by default, so that
// a hub exposed to anonymous clients stays within a known envelope of
// memory and CPU (docs/operations.md states it). [Limits] caps request sizes,
// matchers, connections, the queues, concurrent replays, and what URL
// patterns may cost: the hub estimates a pattern's compiled size and
// groups before compiling it, refuses one over the limits with 400
// (anonymous streams get tighter ones, see [PatternLimits]), and bounds
// the patterns any one topic is evaluated against. Each subscriber has a
// bounded queue: one that stops reading is disconnected instead of slowing
// the publisher or the other subscribers, and resumes from history when it
// reconnects. A publish or QUERY body must arrive
// within [Limits].BodyTimeout, a read deadline the hub sets itself, so
// that it holds on a server without timeouts. What comes before and
// between requests is the server's to bound: give it a ReadHeaderTimeout
// and an IdleTimeout. Answers 429 and 503 carry Retry-After; a browser's
// EventSource, which gives up for good on any status but 200, is answered
// them on the subscribe endpoint as a 200 stream that only sets its retry
// delay and ends (see [Metrics].SubscribesDeferred).
//
// # Presence
//
// With [WithSubscriptions] the hub publishes a private update of SSE type
// "mercure" when each subscription starts and ends, serves the
// subscriptions web API under its path, and lists the active ones to Go
// code with [Hub.Subscriptions].
//
// # Operations
//
// [Hub.Metrics] counts what the hub does (package promhub exports it to
// Prometheus); [Hub.Live] and [Hub.Ready], and their handlers, answer
// health probes. The hub traces publishes, subscribes and its store's
// calls through the OpenTelemetry API (see [WithTracerProvider]) and logs
// to [slog.Default] unless [WithLogger] says otherwise: once when a
// failure begins and once when it ends, with the trace of the request.
//
// [WithDebugger] serves a page for people, at the hub path followed by
// /debug/: subscribe (also from a shared link) and see the events arrive,
// publish, see who is connected and the hub's activity over the last
// minutes, with what the viewer's own token or session allows.
// [WithInsecurePlayground] adds a self-serve token for everything, for
// local development only.
//
// # Shutting down
//
// [Hub.Shutdown] ends every stream and waits for their goroutines; with
// [WithDrain] it ends them gradually, so that their clients do not all
// reconnect in the same second. Call it before [http.Server.Shutdown],
// which does not wait for streams, or from [http.Server.RegisterOnShutdown]
// (docs/operations.md shows how).
//
// # Authorization
//
// Application code publishes with [Hub.Publish] and needs no token. Over
// HTTP the hub is an OAuth 2.0 protected resource: with [WithIssuer] it
// validates RFC 9068 access tokens whose authorization_details grant
// publish and subscribe on topic matchers. Publishing needs publish on
// every topic of the update; a private update reaches a stream whose token
// grants subscribe on any one of its topics, live and on replay.
//
// Tokens come from the Authorization header, or else from a cookie (see
// [WithCookieName]); a stream ends when its token expires. Subscribers
// without a token are refused unless [WithAnonymousSubscribers] is given;
// they receive public updates only. Serve [Hub.MetadataHandler] at
// [Hub.MetadataPath] so that clients can discover the hub's requirements.
//
// An [Issuer] is either the application itself, with its keys given, or
// an OAuth 2.0 authorization server whose keys the hub fetches and keeps
// fresh. An application that is its own issuer mints tokens with a
// [Signer] and hands browsers theirs with [Hub.SetCookie]; [Keys] gives
// the hub the public key (or HMAC secret) and [NewSigner] takes the
// private one, as crypto keys, [PEM] or an [HMACSecret]. [WithCORS] lets
// pages on other origins subscribe with credentials.
//
// [WithAuthorizer] authorizes the requests that present no token with
// the application's own session instead: an embedding extension, not
// part of the protocol. The application maps a request to an [Access],
// the grants a token would carry, which the hub applies by the same rules
// (private updates, publishing, the subscriptions web API, payloads). Its
// streams have no expiry: the hub asks the application again at an
// interval, and ends the streams of a session that ended or whose grants
// changed. Tokens keep working beside it.
//
// A refused token is told why: the challenge's error_description and the
// problem document name the cause from the fixed vocabulary of the
// reasons in [Metrics] TokenFailures ([TokenExpired], [TokenAudience],
// [TokenLegacyClaim], ...), never repeating the token.
//
// # Pre-standard clients
//
// [WithLegacyClients] turns on a compatibility mode for the clients of
// the drafts before the standard, such as Symfony's Mercure component
// (MercureBundle, API Platform) and EventSource polyfills: tokens with the
// mercure claim, verified with keys named for them, topic= selectors with
// URI templates, the [LegacyCookieName] cookie and the authorization query
// parameter. Their resume parameters (lastEventID, lastEventId) are read
// in either mode. docs/migration.md is the guide to moving such an
// application.
//
// [WithInsecurePublishing] accepts publications without a token, for
// closed networks only. A hub without any issuer or authorizer has
// anonymous subscribers only, and it refuses private updates
// ([ErrPrivateUnreadable]): no stream could receive them.
//
// See the examples directory for a standalone hub.
package mercure
