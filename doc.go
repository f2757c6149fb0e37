// Package mercure embeds a complete Mercure hub (draft-dunglas-mercure-08)
// in a Go application's own process.
//
// Mercure pushes updates to browsers and other clients over Server-Sent
// Events. Publishers send updates about topics (usually the URLs of the
// resources that changed); subscribers hold one long-lived stream and
// receive the updates whose topics their matchers select. With the hub in
// the same process, the application publishes by calling [Hub.Publish]
// from the code that changes its state, and mounts the hub on its own
// router: there is no second service to deploy, secure or reach.
//
// This documentation cites the protocol's sections as (spec §Section)
// or (spec §Section: Subsection).
//
// # Example
//
// New builds the hub, Mount puts it on the application's router, Publish
// tells every subscriber, Shutdown ends the streams cleanly:
//
//	hub, err := mercure.New("https://example.com/.well-known/mercure")
//	if err != nil {
//		log.Fatal(err)
//	}
//	mux := http.NewServeMux()
//	hub.Mount(mux) // GET and QUERY subscribe, POST publishes
//	mux.HandleFunc("POST /books/{id}/checkout", func(w http.ResponseWriter, r *http.Request) {
//		// ... change the state, then:
//		hub.Publish(r.Context(), mercure.Update{
//			Topics: []string{"https://example.com/books/" + r.PathValue("id")},
//			Data:   `{"status":"checked out"}`,
//		})
//	})
//	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
//	srv.RegisterOnShutdown(func() { hub.Shutdown(context.Background()) })
//
// A browser listens to one book with
//
//	new EventSource("/.well-known/mercure?match=" + encodeURIComponent("https://example.com/books/1"))
//
// or to every book with the URL pattern matcher
// match_urlpattern=https://example.com/books/:id.
//
// # Routing
//
// The hub URL given to [New] is the hub's identity: the aud of its
// tokens, the base of relative topics, the ids of its subscriptions.
// [Hub.Mount] registers the hub's routes on a router that sees full
// paths; any other router routes [Hub.Path] (and below it) and
// [Hub.MetadataPath] to the hub, which is an [http.Handler]. The hub
// serves a route only right after where it is mounted, as the request
// line names it ([http.StripPrefix] counted back in), or after a path of
// [WithProxyPath]: never at a path that merely ends the same way.
//
// # History, stores and clusters
//
// The hub keeps recent updates (by default the latest 1 000, in memory): a
// client that reconnects with Last-Event-ID gets the updates it missed
// before the live ones, with neither gap nor duplicate. [WithStore] takes
// another store: package memstore's with other bounds, boltstore's on
// disk, or redisstore's and pgstore's, shared by several instances of the
// application, which then act as one hub. Package store is the contract
// for store authors.
//
// # Authorization
//
// Application code publishes with [Hub.Publish] and needs no token. Over
// HTTP the hub is an OAuth 2.0 protected resource: with [WithIssuer] it
// validates RFC 9068 access tokens whose authorization_details grant
// publish and subscribe on topic matchers; a private update reaches only
// the streams whose token grants subscribe on one of its topics. An
// application that is its own issuer mints tokens with a [Signer] and
// hands browsers theirs with [Hub.SetCookie]. [WithAuthorizer] authorizes
// requests with the application's own session instead, an embedding
// extension. [WithAnonymousSubscribers] lets clients without credentials
// receive public updates.
//
// # Limits
//
// Every cost a client can make the hub pay is bounded by default
// ([Limits]): request sizes, matchers, URL patterns, connections, queues,
// replays, and the time a stream may hold. A subscriber that stops reading
// is disconnected, never waited for, and resumes from history. The server
// around the hub bounds what comes before and between requests: give it a
// ReadHeaderTimeout and an IdleTimeout.
//
// # Operations
//
// [Hub.Metrics] counts what the hub does (package promhub exposes it to
// Prometheus); [Hub.Live] and [Hub.Ready] answer health probes. The hub
// traces through OpenTelemetry ([WithTracerProvider]) and logs to
// [slog.Default] unless [WithLogger] says otherwise. [Hub.Shutdown] ends
// every stream, gradually with [Limits].Drain.
//
// The guides in the repository's docs directory say more: routing and
// publishing (embedding.md), tokens and sessions (auth.md), stores and
// clusters, operations, failures, performance, and the migration from
// pre-standard clients ([WithLegacyClients]).
package mercure
