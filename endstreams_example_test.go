package mercure_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/mercurekit/mercure"
)

// ExampleHub_EndStreams ends a user's streams at logout, on every
// instance sharing the hub's store, instead of waiting for the next
// re-check of the session.
func ExampleHub_EndStreams() {
	var mu sync.Mutex
	sessions := map[string]string{"s3cr3t": "alice"} // session id → user
	authorize := func(r *http.Request) (*mercure.Access, error) {
		c, err := r.Cookie("session")
		if err != nil {
			return nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		user := sessions[c.Value]
		if user == "" {
			return nil, nil
		}
		return &mercure.Access{
			Subject:   user,
			Session:   c.Value,
			Subscribe: []mercure.Match{{Pattern: "https://example.com/users/" + user + "/{*}?", Type: mercure.MatchURLPattern}},
		}, nil
	}
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithAuthorizer(authorize, time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())

	mux := http.NewServeMux()
	hub.Mount(mux)
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("session")
		if err != nil {
			return
		}
		mu.Lock()
		delete(sessions, c.Value) // first: the streams' reconnections are refused
		mu.Unlock()
		if err := hub.EndStreams(r.Context(), mercure.StreamFilter{Session: c.Value}); err != nil {
			log.Print(err) // the store failed: this instance's streams ended all the same
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(method, path string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.AddCookie(&http.Cookie{Name: "session", Value: "s3cr3t"})
		req.Header.Set("Sec-Fetch-Site", "same-origin") // as the browser sends it from the app's pages
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		return res
	}
	stream := send(http.MethodGet, "/.well-known/mercure?match=https%3A%2F%2Fexample.com%2Fusers%2Falice%2Finbox")
	defer stream.Body.Close()
	fmt.Println("stream:", stream.StatusCode)

	send(http.MethodPost, "/logout").Body.Close()
	_, err = io.Copy(io.Discard, stream.Body) // returns once the hub ends the stream
	fmt.Println("stream ended:", err == nil)
	res := send(http.MethodGet, "/.well-known/mercure?match=https%3A%2F%2Fexample.com%2Fusers%2Falice%2Finbox")
	res.Body.Close()
	fmt.Println("reconnection:", res.StatusCode)
	// Output:
	// stream: 200
	// stream ended: true
	// reconnection: 401
}
