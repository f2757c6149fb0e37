package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
)

// exampleHub serves a hub with history and insecure publishing, for the
// examples; stop it with the returned function.
func exampleHub() (hub *mercure.Hub, hubURL string, stop func()) {
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithInsecurePublishing())
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(hub)
	return hub, srv.URL + hub.Path(), func() { hub.Shutdown(context.Background()); srv.Close() }
}

// ExampleClient_Subscribe receives the updates of a URL pattern, in
// order, and stops by breaking out of the loop.
func ExampleClient_Subscribe() {
	hub, hubURL, stop := exampleHub()
	defer stop()
	hub.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/books/1"}, ID: "urn:ex:1", Data: "checked out"})
	hub.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/books/2"}, ID: "urn:ex:2", Type: "returned"})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &client.Client{}
	n := 0
	for ev, err := range c.Subscribe(ctx, hubURL, client.Subscription{
		Matchers:    []client.Matcher{client.URLPattern("https://example.com/books/:id")},
		LastEventID: client.Earliest, // the retained history first
	}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %q %q\n", ev.ID, ev.Type, ev.Data)
		if n++; n == 2 {
			break
		}
	}
	// Output:
	// urn:ex:1 "" "checked out"
	// urn:ex:2 "returned" ""
}

// ExampleClient_Subscribe_resume shows a subscriber surviving a stream the
// hub ends: it reconnects and resumes after the last event it delivered.
func ExampleClient_Subscribe_resume() {
	hub, err := mercure.New("https://example.com/.well-known/mercure")
	if err != nil {
		log.Fatal(err)
	}
	// The first stream is cut after one event.
	var resumed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !resumed.Swap(true) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: urn:ex:1\ndata: one\n\nid: urn:ex:2\nda") // ends mid-event
			return
		}
		fmt.Println("resuming after", r.Header.Get("Last-Event-ID"))
		hub.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer hub.Shutdown(context.Background())
	hub.Publish(context.Background(), mercure.Update{Topics: []string{"t"}, ID: "urn:ex:1", Data: "one"})
	hub.Publish(context.Background(), mercure.Update{Topics: []string{"t"}, ID: "urn:ex:2", Data: "two"})

	c := &client.Client{
		ReconnectDelay: 10 * time.Millisecond,
		OnRetry:        func(err error, _ time.Duration) { fmt.Println("disconnected") },
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ev, err := range c.Subscribe(ctx, srv.URL+hub.Path(), client.Subscription{Matchers: []client.Matcher{client.Exact("t")}}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.ID, ev.Data)
		if ev.ID == "urn:ex:2" {
			break
		}
	}
	// Output:
	// urn:ex:1 one
	// disconnected
	// resuming after urn:ex:1
	// urn:ex:2 two
}

// ExampleClient_Discover finds the hub and the cursor of a resource, then
// subscribes from that cursor: the update published in between arrives.
func ExampleClient_Discover() {
	hub, hubURL, stop := exampleHub()
	defer stop()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hub.Link(w.Header(), mercure.Link{Topic: "https://example.com/books/1", LastEventID: true})
		fmt.Fprint(w, `{"@id":"https://example.com/books/1","status":"available"}`)
	}))
	defer app.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &client.Client{}
	d, err := c.Discover(ctx, app.URL+"/books/1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("hub:", d.Hubs[0].URL, "topic:", d.Topic, "cursor:", d.Hubs[0].LastEventID)

	hub.Publish(ctx, mercure.Update{Topics: []string{d.Topic}, ID: "urn:ex:3", Data: `{"status":"checked out"}`})

	_, sub := d.Subscription() // d.Hubs[0].URL is the hub's public URL; here it is served at hubURL
	for ev, err := range c.Subscribe(ctx, hubURL, sub) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.ID, ev.Data)
		break
	}
	// Output:
	// hub: https://example.com/.well-known/mercure topic: https://example.com/books/1 cursor: earliest
	// urn:ex:3 {"status":"checked out"}
}

// ExampleClient_Publish publishes an update and inspects a refusal.
func ExampleClient_Publish() {
	_, hubURL, stop := exampleHub()
	defer stop()
	ctx := context.Background()
	c := &client.Client{}

	retry := 5 * time.Second
	id, err := c.Publish(ctx, hubURL, client.Update{
		Topics: []string{"https://example.com/books/1"},
		Data:   `{"status":"checked out"}`,
		ID:     "urn:uuid:5d9a8f9e-3c51-4f4a-9d3e-5a1d2c7e8f90",
		Type:   "book-updated",
		Retry:  &retry,
	})
	fmt.Println(id, err)

	_, err = c.Publish(ctx, hubURL, client.Update{Topics: []string{"https://example.com/books/1"}, Type: "mercure"})
	var se *client.StatusError
	fmt.Println(errors.Is(err, client.ErrBadRequest), errors.As(err, &se) && se.StatusCode == 400)
	// Output:
	// urn:uuid:5d9a8f9e-3c51-4f4a-9d3e-5a1d2c7e8f90 <nil>
	// true true
}
