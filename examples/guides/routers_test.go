package guides_test

// The router recipes of docs/embedding.md that need chi and gorilla/mux,
// verbatim, each checked with the hub's endpoint, a path that merely ends
// like it (404: the routes-as-mounted rule) and the metadata.

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"

	"github.com/mercurekit/mercure"
)

// prefixedHub is the hub of the recipes: its URL has a prefix.
func prefixedHub() *mercure.Hub {
	hub, err := mercure.New("https://example.com/api/realtime/.well-known/mercure", mercure.WithLogger(nil))
	if err != nil {
		log.Fatal(err)
	}
	return hub
}

// printRoutes prints what h answers at the hub path, at a path that only
// ends like it, and at the metadata path.
func printRoutes(h http.Handler) {
	for _, p := range []struct{ method, path string }{
		{http.MethodOptions, "/api/realtime/.well-known/mercure"},
		{http.MethodOptions, "/api/realtime/x/.well-known/mercure"},
		{http.MethodGet, "/.well-known/oauth-protected-resource/api/realtime/.well-known/mercure"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(p.method, p.path, nil))
		fmt.Println(p.method, p.path, rec.Code)
	}
}

func Example_chiUnderPrefix() {
	hub := prefixedHub()
	defer hub.Shutdown(context.Background())

	r := chi.NewRouter()
	r.Route("/api/realtime", func(r chi.Router) {
		r.Mount("/.well-known/mercure", hub) // the hub and its sub-routes
	})
	r.Handle(hub.MetadataPath(), hub)

	printRoutes(r)
	// Output:
	// OPTIONS /api/realtime/.well-known/mercure 204
	// OPTIONS /api/realtime/x/.well-known/mercure 404
	// GET /.well-known/oauth-protected-resource/api/realtime/.well-known/mercure 200
}

func Example_gorillaUnderPrefix() {
	hub := prefixedHub()
	defer hub.Shutdown(context.Background())

	r := mux.NewRouter().UseEncodedPath()
	r.PathPrefix("/api/realtime").Subrouter().PathPrefix("/.well-known/mercure").Handler(hub)
	r.Handle(hub.MetadataPath(), hub)

	printRoutes(r)
	// Output:
	// OPTIONS /api/realtime/.well-known/mercure 204
	// OPTIONS /api/realtime/x/.well-known/mercure 404
	// GET /.well-known/oauth-protected-resource/api/realtime/.well-known/mercure 200
}
