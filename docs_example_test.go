package mercure_test

// The Go snippets of README.md and of the guides under docs/ that need
// only this module, verbatim (docs_test.go checks that every snippet of
// the docs is in a test file). Those that need chi, gorilla/mux, a store's
// driver or Prometheus are in examples/guides.

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
)

// Example_readme is the README's embedding snippet: a hub on the
// application's router, and a handler that publishes. (It serves on :8080,
// so it is compiled, not run; Example_publishFromHandler runs the handler.)
func Example_readme() {
	hub, err := mercure.New("https://example.com/.well-known/mercure")
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	hub.Mount(mux) // GET subscribes, POST publishes; and the hub's other routes
	mux.HandleFunc("POST /books/{id}/checkout", func(w http.ResponseWriter, r *http.Request) {
		// ... change the state, then tell every subscriber:
		_, err := hub.Publish(r.Context(), mercure.Update{
			Topics: []string{"https://example.com/books/" + r.PathValue("id")},
			Data:   `{"status":"checked out"}`,
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})

	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	stop, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	<-stop.Done()
	ctx, cancelShutdown := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelShutdown()
	hub.Shutdown(ctx) // first: every stream ends cleanly, and its client reconnects
	srv.Shutdown(ctx)
}

// Example_publishFromHandler runs the README's handler: a subscriber of the
// book gets the update its checkout publishes.
func Example_publishFromHandler() {
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithLogger(nil))
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())

	mux := http.NewServeMux()
	hub.Mount(mux) // the hub, its subscriptions API, its debugger, its metadata
	mux.HandleFunc("POST /books/{id}/checkout", func(w http.ResponseWriter, r *http.Request) {
		// ... change the state, then tell every subscriber:
		_, err := hub.Publish(r.Context(), mercure.Update{
			Topics: []string{"https://example.com/books/" + r.PathValue("id")},
			Data:   `{"status":"checked out"}`,
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	stream := docsStream(srv.URL+"/.well-known/mercure?match="+url.QueryEscape("https://example.com/books/1"), nil)
	defer stream.Body.Close()
	res, err := http.Post(srv.URL+"/books/1/checkout", "", nil)
	if err != nil {
		log.Fatal(err)
	}
	res.Body.Close()
	fmt.Println(docsData(stream))
	// Output: {"status":"checked out"}
}

// Example_stripPrefix is docs/embedding.md's hub URL and its http.StripPrefix
// recipe: the hub serves right after its path, and nowhere else.
func Example_stripPrefix() {
	hub, err := mercure.New("https://example.com/api/realtime/.well-known/mercure")
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())

	inner := http.NewServeMux()
	inner.Handle("/.well-known/mercure", hub)  // the hub path without the prefix
	inner.Handle("/.well-known/mercure/", hub) // and its sub-routes
	mux := http.NewServeMux()
	mux.Handle("/api/realtime/", http.StripPrefix("/api/realtime", inner))
	mux.Handle(hub.MetadataPath(), hub) // at the root of the host

	for _, p := range []struct{ method, path string }{
		{http.MethodOptions, "/api/realtime/.well-known/mercure"},
		{http.MethodOptions, "/api/realtime/x/.well-known/mercure"},
		{http.MethodGet, "/.well-known/oauth-protected-resource/api/realtime/.well-known/mercure"},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(p.method, p.path, nil))
		fmt.Println(p.method, p.path, rec.Code)
	}
	// Output:
	// OPTIONS /api/realtime/.well-known/mercure 204
	// OPTIONS /api/realtime/x/.well-known/mercure 404
	// GET /.well-known/oauth-protected-resource/api/realtime/.well-known/mercure 200
}

// Example_discoveryLinks is docs/embedding.md's Link snippet.
func Example_discoveryLinks() {
	hub, err := mercure.New("https://example.com/.well-known/mercure")
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	mux := http.NewServeMux()

	mux.HandleFunc("GET /books/{id}", func(w http.ResponseWriter, r *http.Request) {
		hub.Link(w.Header(), mercure.Link{
			Topic:       "https://example.com/books/" + r.PathValue("id"), // rel="self"
			LastEventID: true,                                             // the hub's position
		})
		fmt.Fprint(w, `{"status":"available"}`)
	})

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/books/1", nil))
	for _, l := range rec.Header().Values("Link") {
		fmt.Println(l)
	}
	// Output:
	// <https://example.com/.well-known/mercure>; rel="mercure"; last-event-id="earliest"
	// <https://example.com/books/1>; rel="self"
}

// Example_goClient is docs/embedding.md's Go client snippet, run against a
// hub that holds one update.
func Example_goClient() {
	secret := mercure.HMACSecret("an HMAC secret of at least 32 bytes!")
	keys, err := mercure.Keys(secret)
	if err != nil {
		log.Fatal(err)
	}
	hub, err := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithIssuer(mercure.Issuer{ID: "https://example.com", SubscriberKeys: keys}), mercure.WithLogger(nil))
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	srv := httptest.NewServer(hub)
	defer srv.Close()
	signer, err := mercure.NewSigner(secret, "https://example.com", hub.URL())
	if err != nil {
		log.Fatal(err)
	}
	tok, err := signer.Token(mercure.Grant{Subject: "reader", Subscribe: []mercure.Match{{Pattern: "*"}}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := hub.Publish(context.Background(), mercure.Update{
		Topics: []string{"https://example.com/books/1"}, Data: `{"status":"out"}`, ID: "urn:uuid:1c0f2b5e-94a1-4a57-9d7e-3f6c0b2a8e41",
	}); err != nil {
		log.Fatal(err)
	}
	ctx, hubURL, cursor := context.Background(), srv.URL+"/.well-known/mercure", client.Earliest

	err = func() error {
		c := &client.Client{Token: client.StaticToken(tok)} // or a func minting a fresh token at every (re)connect
		for ev, err := range c.Subscribe(ctx, hubURL, client.Subscription{
			Matchers:    []client.Matcher{client.Exact("https://example.com/books/1"), client.URLPattern("/authors/:id")},
			LastEventID: cursor, // from discovery, or client.Earliest
		}) {
			if err != nil { // a refusal: errors.Is(err, client.ErrUnauthorized), errors.As(err, &statusErr)
				return err
			}
			fmt.Println(ev.ID, ev.Data)
			break // or go on: the iterator reconnects and resumes by itself
		}
		return nil
	}()
	fmt.Println(err)
	// Output:
	// urn:uuid:1c0f2b5e-94a1-4a57-9d7e-3f6c0b2a8e41 {"status":"out"}
	// <nil>
}

// Example_cookieJar is docs/embedding.md's cookie jar: a Go client whose
// stream the application's session cookie authorizes (WithAuthorizer).
func Example_cookieJar() {
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithLogger(nil),
		mercure.WithAuthorizer(func(r *http.Request) (*mercure.Access, error) {
			c, err := r.Cookie("session")
			if err != nil || c.Value != "alice" {
				return nil, nil // no session: anonymous
			}
			return &mercure.Access{Subject: "alice", Subscribe: []mercure.Match{{Pattern: "https://example.com/users/alice"}}}, nil
		}, time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	srv := httptest.NewServer(hub)
	defer srv.Close()
	if _, err := hub.Publish(context.Background(), mercure.Update{
		Topics: []string{"https://example.com/users/alice"}, Data: "for alice", Private: true, ID: "urn:example:1",
	}); err != nil {
		log.Fatal(err)
	}

	err = func() error {
		jar, err := cookiejar.New(nil)
		if err != nil {
			return err
		}
		c := &client.Client{HTTPClient: &http.Client{Jar: jar}} // the login's cookies ride along
		u, _ := url.Parse(srv.URL)
		jar.SetCookies(u, []*http.Cookie{{Name: "session", Value: "alice"}}) // what the login set
		for ev, err := range c.Subscribe(context.Background(), srv.URL+"/.well-known/mercure", client.Subscription{
			Matchers: []client.Matcher{client.Exact("https://example.com/users/alice")}, LastEventID: client.Earliest,
		}) {
			if err != nil {
				return err
			}
			fmt.Println(ev.ID, ev.Data)
			break
		}
		return nil
	}()
	fmt.Println(err)
	// Output:
	// urn:example:1 for alice
	// <nil>
}

// Example_ownIssuerPEM is docs/auth.md's first snippet: the application as
// its own issuer, with keys in PEM files. (It reads files of the working
// directory, so it is compiled, not run; ExampleSigner and ExampleKeys run
// the same calls.)
func Example_ownIssuerPEM() {
	var w http.ResponseWriter = httptest.NewRecorder()
	ctx, msg := context.Background(), "you have mail"

	// Key material as the app holds it: PEM files here; crypto keys
	// (*ecdsa, *rsa, ed25519) and mercure.HMACSecret (32 bytes or more) work too.
	privatePEM, _ := os.ReadFile("signing-key.pem") // PRIVATE KEY, EC or RSA PRIVATE KEY
	publicPEM, _ := os.ReadFile("signing-key.pub")  // PUBLIC KEY or CERTIFICATE

	publicKeys, _ := mercure.Keys(mercure.PEM(publicPEM))
	hub, _ := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithIssuer(mercure.Issuer{ID: "https://example.com", SubscriberKeys: publicKeys}),
		mercure.WithAnonymousSubscribers(), // public updates for everyone else
	)
	signer, _ := mercure.NewSigner(mercure.PEM(privatePEM), "https://example.com", hub.URL())

	// At login: a short-lived token for this user's topics, in the hub's cookie.
	tok, _ := signer.Token(mercure.Grant{Subject: "alice",
		Subscribe: []mercure.Match{{Pattern: "https://example.com/users/alice/{*}?", Type: mercure.MatchURLPattern}}})
	hub.SetCookie(w, tok)

	// Later, only Alice's streams receive it:
	hub.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/users/alice/inbox"}, Data: msg, Private: true})
}

// Example_authorizationServer is docs/auth.md's authorization server
// snippet. (The hub would fetch the server's metadata, so it is compiled,
// not run; authserver_test.go runs such issuers.)
func Example_authorizationServer() {
	hub, err := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithIssuer(mercure.Issuer{ID: "https://auth.example.com", AuthorizationServer: true}),
	)

	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
}

// docsUser and docsSessions stand for the application's session store in
// docs/auth.md's Authorizer snippet.
type docsUser struct{ Name, SessionID string }

type docsSessions map[string]*docsUser // session cookie → user

func (s docsSessions) User(r *http.Request) (*docsUser, error) {
	c, err := r.Cookie("session")
	if err != nil {
		return nil, nil
	}
	return s[c.Value], nil
}

// docsAuthorizedHub is docs/auth.md's Authorizer snippet.
func docsAuthorizedHub(sessions docsSessions) *mercure.Hub {
	hub, _ := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithAuthorizer(func(r *http.Request) (*mercure.Access, error) {
			user, err := sessions.User(r) // the app's own session lookup
			if err != nil || user == nil {
				return nil, err // nil, nil: no session, anonymous
			}
			return &mercure.Access{
				Subject:   user.Name,
				Session:   user.SessionID, // for hub.EndStreams at logout
				Subscribe: []mercure.Match{{Pattern: "https://example.com/users/" + user.Name + "/{*}?", Type: mercure.MatchURLPattern}},
				// In its subscriptions that Subscribe selects (see below):
				Payload: map[string]string{"user": user.Name},
			}, nil
		}, time.Minute), // re-checked every minute or so
	)
	return hub
}

// docsLogout is docs/auth.md's EndStreams snippet.
func docsLogout(ctx context.Context, hub *mercure.Hub, sessionID string) {
	// At logout: clear the session first, then end its streams.
	if err := hub.EndStreams(ctx, mercure.StreamFilter{Session: sessionID}); err != nil {
		log.Printf("ending streams: %v", err) // wraps mercure.ErrStore: only this hub's ended
	}
}

// Example_sessionAuthorizer runs docs/auth.md's Authorizer and EndStreams
// snippets: Alice's session reads her private update, and her logout ends
// her stream.
func Example_sessionAuthorizer() {
	sessions := docsSessions{"s3cr3t": {Name: "alice", SessionID: "s3cr3t"}}
	hub := docsAuthorizedHub(sessions)
	defer hub.Shutdown(context.Background())
	srv := httptest.NewServer(hub)
	defer srv.Close()

	stream := docsStream(srv.URL+"/.well-known/mercure?match="+url.QueryEscape("https://example.com/users/alice/inbox"),
		&http.Cookie{Name: "session", Value: "s3cr3t"})
	defer stream.Body.Close()
	if _, err := hub.Publish(context.Background(), mercure.Update{
		Topics: []string{"https://example.com/users/alice/inbox"}, Data: "for alice", Private: true,
	}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(docsData(stream))

	delete(sessions, "s3cr3t")
	docsLogout(context.Background(), hub, "s3cr3t")
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
	}
	fmt.Println("stream ended:", sc.Err())
	// Output:
	// for alice
	// stream ended: <nil>
}

// Example_limits is docs/operations.md's Limits snippet.
func Example_limits() {
	hub, err := mercure.New("https://example.com/.well-known/mercure",
		mercure.WithLimits(mercure.Limits{
			MaxConnections:          50_000,
			MaxAnonymousConnections: 10_000,
			MaxConnectionsPerClient: 32,
		}),
		// Behind a proxy every client has the proxy's address: key clients by
		// a header the proxy sets and clients cannot forge.
		mercure.WithClientKey(func(r *http.Request) string { return r.Header.Get("X-Real-IP") }),
	)

	fmt.Println(err)
	defer hub.Shutdown(context.Background())
	// Output: <nil>
}

// Example_healthHandlers is docs/operations.md's health snippet.
func Example_healthHandlers() {
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithLogger(nil))
	if err != nil {
		log.Fatal(err)
	}

	probe := func(check func() error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if err := check(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		}
	}
	ops := http.NewServeMux() // on a listener only operators reach, never the public one
	ops.Handle("GET /healthz", probe(hub.Live))
	ops.Handle("GET /readyz", probe(hub.Ready))

	ready := func() {
		rec := httptest.NewRecorder()
		ops.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	ready()
	hub.Shutdown(context.Background())
	ready()
	// Output:
	// 200 ok
	// 503 mercure: the hub is shutting down
}

// Example_gracefulShutdown is docs/operations.md's shutdown recipe. (It
// waits for SIGTERM, so it is compiled, not run;
// TestDrain_RegisterOnShutdownRecipe runs the same wiring.)
func Example_gracefulShutdown() {
	hubURL := "https://example.com/.well-known/mercure"

	hub, err := mercure.New(hubURL, mercure.WithLimits(mercure.Limits{Drain: 10 * time.Second}))
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	hub.Mount(mux)
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	hubDone := make(chan struct{})
	srv.RegisterOnShutdown(func() { // runs when srv.Shutdown begins
		defer close(hubDone)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		hub.Shutdown(ctx) // the drain, then the end of every stream
	})
	go srv.ListenAndServe()

	sigterm, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	<-sigterm.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	srv.Shutdown(ctx) // no new connections, no keep-alive; waits for the requests
	<-hubDone         // and for the hub's own streams
}

// docsStream opens a stream at u, with a session cookie when given (and
// the header a browser sends from the application's own pages).
func docsStream(u string, session *http.Cookie) *http.Response {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if session != nil {
		req.AddCookie(session)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		log.Fatalf("subscribe: %s", res.Status)
	}
	return res
}

// docsData returns the data of the stream's next event.
func docsData(res *http.Response) string {
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return data
		}
	}
	log.Fatalf("stream ended: %v", sc.Err())
	return ""
}
