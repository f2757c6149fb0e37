package mercure_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/mercurekit/mercure"
)

// ExampleNew mounts a hub on an application's own router, next to the
// application's routes.
func ExampleNew() {
	hub, err := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithLimits(mercure.Limits{MaxConnectionsPerClient: 32}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())

	mux := http.NewServeMux()
	mux.Handle(hub.Path(), hub)
	mux.HandleFunc("GET /books/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"@id":"/books/%s"}`, r.PathValue("id"))
	})
	fmt.Println(hub.Path())
	// Output: /.well-known/mercure
}

// ExampleHub_Publish publishes from application code, right where the
// state changes, and shows a subscriber receiving the update.
func ExampleHub_Publish() {
	hub, err := mercure.New("https://example.com/.well-known/mercure")
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	defer hub.Shutdown(context.Background())

	// A subscriber listens to every book through a URL pattern.
	res, err := http.Get(srv.URL + "/.well-known/mercure?match_urlpattern=" + url.QueryEscape("/books/:id"))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()

	id, err := hub.Publish(context.Background(), mercure.Update{
		Topics: []string{"https://example.com/books/1"},
		Data:   `{"status":"checked out"}`,
		ID:     "urn:uuid:7b0bd6b8-2c55-4d7a-8f6c-1a1d8e5f3c21",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("published", id)

	// The stream starts with its position: an id and no data, which an
	// EventSource records as its last event id without firing an event.
	// Then comes the update.
	sc := bufio.NewScanner(res.Body)
	for blocks := 0; blocks < 2 && sc.Scan(); {
		if sc.Text() == "" {
			blocks++
			continue
		}
		fmt.Println(sc.Text())
	}
	// Output:
	// published urn:uuid:7b0bd6b8-2c55-4d7a-8f6c-1a1d8e5f3c21
	// id: earliest
	// id: urn:uuid:7b0bd6b8-2c55-4d7a-8f6c-1a1d8e5f3c21
	// data: {"status":"checked out"}
}

// ExampleHub_Publish_errors shows that invalid updates are refused with
// errors that can be inspected.
func ExampleHub_Publish_errors() {
	hub, err := mercure.New("https://example.com/.well-known/mercure")
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())

	_, err = hub.Publish(context.Background(), mercure.Update{Topics: []string{"/.well-known/mercure/subscriptions/x"}})
	fmt.Println(errors.Is(err, mercure.ErrInvalidUpdate))
	_, err = hub.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/a"}, Type: "mercure"})
	fmt.Println(errors.Is(err, mercure.ErrInvalidUpdate))
	_, err = hub.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/a"}, Data: strings.Repeat("x", 2<<20)})
	fmt.Println(errors.Is(err, mercure.ErrTooLarge))
	// Output:
	// true
	// true
	// true
}

// ExampleWithLimits tunes what clients may cost the hub: here anonymous
// subscribers get even tighter URL pattern limits than the default, and
// a pattern over them is refused with 400 before it is compiled.
func ExampleWithLimits() {
	hub, err := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithLimits(mercure.Limits{
			MaxConnections:    50_000,
			AnonymousPatterns: mercure.PatternLimits{MaxGroups: 4},
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	srv := httptest.NewServer(hub)
	defer srv.Close()

	pattern := url.QueryEscape("https://example.com/:a/:b/:c/:d/:e")
	res, err := http.Get(srv.URL + "/.well-known/mercure?match_urlpattern=" + pattern)
	if err != nil {
		log.Fatal(err)
	}
	res.Body.Close()
	fmt.Println(res.StatusCode)
	// Output: 400
}

// ExampleHub_Shutdown stops a server that serves a hub: the hub first, so
// that its streams end, then the server.
func ExampleHub_Shutdown() {
	hub, err := mercure.New("https://example.com/.well-known/mercure")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: "localhost:0", Handler: hub}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hub.Shutdown(ctx); err != nil {
		log.Print(err)
	}
	if err := srv.Shutdown(ctx); err != nil {
		log.Print(err)
	}
	_, err = hub.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/a"}})
	fmt.Println(errors.Is(err, mercure.ErrHubClosed), errors.Is(hub.Live(), mercure.ErrHubClosed))
	// Output: true true
}

// ExampleHub_Link advertises the hub on an application's own response, with
// the cursor that lets the client subscribe without missing an update.
func ExampleHub_Link() {
	hub, err := mercure.New("https://example.com/.well-known/mercure")
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())

	handler := func(w http.ResponseWriter, r *http.Request) {
		err := hub.Link(w.Header(), mercure.Link{Topic: "https://example.com/books/1", LastEventID: true})
		if err != nil {
			log.Print(err)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"@id":"https://example.com/books/1","status":"available"}`)
	}
	rec := httptest.NewRecorder()
	handler(rec, httptest.NewRequest(http.MethodGet, "/books/1", nil))
	for _, l := range rec.Header().Values("Link") {
		fmt.Println(l)
	}
	// Output:
	// <https://example.com/.well-known/mercure>; rel="mercure"; last-event-id="earliest"
	// <https://example.com/books/1>; rel="self"
}

// ExampleSigner shows an application that is its own issuer: it mints a
// short-lived subscriber token at login and hands it to the browser in the
// hub's cookie.
func ExampleSigner() {
	secret := mercure.HMACSecret("an HMAC secret of at least 32 bytes!")
	keys, err := mercure.Keys(secret)
	if err != nil {
		log.Fatal(err)
	}
	hub, err := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithIssuer(mercure.Issuer{ID: "https://example.com", SubscriberKeys: keys}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	signer, err := mercure.NewSigner(secret, "https://example.com", hub.URL())
	if err != nil {
		log.Fatal(err)
	}

	login := func(w http.ResponseWriter, r *http.Request) {
		tok, err := signer.Token(mercure.Grant{
			Subject:   "alice",
			Subscribe: []mercure.Match{{Pattern: "https://example.com/users/alice/{*}?", Type: mercure.MatchURLPattern}},
		})
		if err == nil {
			err = hub.SetCookie(w, tok)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}
	rec := httptest.NewRecorder()
	login(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
	c := rec.Result().Cookies()[0]
	fmt.Println(c.Name, c.Path, c.Secure, c.HttpOnly, c.SameSite == http.SameSiteStrictMode)
	// Output: __Secure-mercure_access_token /.well-known/mercure true true true
}

// ExampleWithAuthorizer authorizes the browser's streams with the
// application's own session cookie: no token to mint, no stream ended by
// a token's expiry. A logged-out session ends its streams within the
// re-check interval.
func ExampleWithAuthorizer() {
	// The application's session store: session id → user.
	sessions := map[string]string{"s3cr3t": "alice"}
	authorize := func(r *http.Request) (*mercure.Access, error) {
		c, err := r.Cookie("session")
		if err != nil || sessions[c.Value] == "" {
			return nil, nil // no session: anonymous
		}
		user := sessions[c.Value]
		return &mercure.Access{
			Subject:   user,
			Subscribe: []mercure.Match{{Pattern: "https://example.com/users/" + user + "/{*}?", Type: mercure.MatchURLPattern}},
		}, nil
	}
	hub, err := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithAuthorizer(authorize, time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	defer hub.Shutdown(context.Background())

	stream := srv.URL + "/.well-known/mercure?match=" + url.QueryEscape("https://example.com/users/alice/inbox")
	res, err := http.Get(stream) // no session
	if err != nil {
		log.Fatal(err)
	}
	res.Body.Close()
	fmt.Println("without a session:", res.StatusCode)

	req, _ := http.NewRequest(http.MethodGet, stream, nil)
	req.AddCookie(&http.Cookie{Name: "session", Value: "s3cr3t"})
	req.Header.Set("Sec-Fetch-Site", "same-origin") // as a browser sends it from the app's pages
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	fmt.Println("with alice's session:", res.StatusCode)

	if _, err := hub.Publish(context.Background(), mercure.Update{
		Topics:  []string{"https://example.com/users/alice/inbox"},
		Data:    "a message for alice",
		Private: true, // only alice's session grants it
		ID:      "urn:uuid:0d7e9c55-3f7a-4c8e-9a59-5e0c4b0f6a11",
	}); err != nil {
		log.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	for blocks := 0; blocks < 2 && sc.Scan(); { // the stream's position, then the update
		if sc.Text() == "" {
			blocks++
			continue
		}
		fmt.Println(sc.Text())
	}
	// Output:
	// without a session: 401
	// with alice's session: 200
	// id: earliest
	// id: urn:uuid:0d7e9c55-3f7a-4c8e-9a59-5e0c4b0f6a11
	// data: a message for alice
}

// ExampleWithLegacyClients runs the hub for a Symfony application that
// still speaks the pre-standard drafts: its tokens are verified with the
// secret of MERCURE_JWT_SECRET, and its browsers subscribe with topic=
// and URI templates.
func ExampleWithLegacyClients() {
	// The secret MercureBundle signs its tokens with (MERCURE_JWT_SECRET):
	// it must be this hub's alone, since such tokens name no audience.
	legacyKeys, err := mercure.Keys(mercure.HMACSecret("!ChangeThisMercureHubJWTSecretKey!"))
	if err != nil {
		log.Fatal(err)
	}
	hub, err := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithLegacyClients(mercure.LegacyClients{PublisherKeys: legacyKeys, SubscriberKeys: legacyKeys}),
		mercure.WithAnonymousSubscribers(),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())

	srv := httptest.NewServer(hub)
	defer srv.Close()
	// What the Twig mercure() helper builds: topic= with a URI template.
	res, err := http.Get(srv.URL + "/.well-known/mercure?topic=" + url.QueryEscape("https://example.com/books/{id}"))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := hub.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/books/1"}, Data: "Dune"}); err != nil {
		log.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data:") {
	}
	fmt.Println(sc.Text())
	// Output: data: Dune
}
