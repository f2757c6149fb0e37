package mercure_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/mercurekit/mercure"
)

// ExampleWithProxyPath serves a hub behind a reverse proxy that maps the
// public https://example.com/.well-known/mercure to /internal/.well-known/mercure
// on the application. The hub serves there, and only there: a path that
// merely ends the same way does not reach it.
func ExampleWithProxyPath() {
	hub, err := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithProxyPath("/internal/.well-known/mercure"), mercure.WithLogger(nil))
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	mux := http.NewServeMux()
	hub.Mount(mux)
	mux.Handle("/internal/", hub) // a catch-all: the hub still answers only at its mount point

	for _, path := range []string{"/internal/.well-known/mercure", "/internal/x/.well-known/mercure"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodOptions, path, nil))
		fmt.Println(path, rec.Code)
	}
	// Output:
	// /internal/.well-known/mercure 204
	// /internal/x/.well-known/mercure 404
}
