package client_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
	"github.com/mercurekit/mercure/internal/testwait"
)

// newSigner returns a signer and a hub option trusting it for both roles.
func newSigner(t testing.TB) (*mercure.Signer, mercure.Option) {
	t.Helper()
	secret := make([]byte, 32)
	rand.Read(secret)
	key, err := jwk.Import(secret)
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	set.AddKey(key)
	s, err := mercure.NewSigner(key, "https://app.example.com", testHubURL)
	if err != nil {
		t.Fatal(err)
	}
	return s, mercure.WithIssuer(mercure.Issuer{ID: "https://app.example.com", PublisherKeys: set, SubscriberKeys: set})
}

func mustToken(t testing.TB, s *mercure.Signer, g mercure.Grant) string {
	t.Helper()
	tok, err := s.Token(g)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// firstError subscribes and returns the error the subscription ends with.
func firstError(t *testing.T, c *client.Client, hubURL string, s client.Subscription) error {
	t.Helper()
	for _, err := range c.Subscribe(testContext(t, testwait.Deadline), hubURL, s) {
		if err != nil {
			return err
		}
		t.Fatal("got an event, want a refusal")
	}
	t.Fatal("subscription ended without an error")
	return nil
}

// Refusals end a subscription at once with a typed error carrying the
// status and the parsed Bearer challenge (AUTH-13, AUTH-14, AUTH-16).
func TestSubscribe_Refusals(t *testing.T) {
	signer, trust := newSigner(t)
	th := startHub(t, trust)
	sub := client.Subscription{Matchers: []client.Matcher{client.Exact("https://example.com/a")}}
	// A token of the hub's issuer signed with a key the hub does not
	// trust: invalid whatever the time.
	foreignSigner, _ := newSigner(t)
	foreign := mustToken(t, foreignSigner, mercure.Grant{Subject: "s", Subscribe: []mercure.Match{{Pattern: "*"}}})

	for _, tc := range []struct {
		name      string
		c         *client.Client
		sub       client.Subscription
		sentinel  error
		status    int
		challenge string // OAuth error code; "-" for no challenge
	}{
		{"no token", fastClient(), sub, client.ErrUnauthorized, 401, ""},
		{"invalid token", &client.Client{Token: client.StaticToken(foreign)}, sub, client.ErrUnauthorized, 401, "invalid_token"},
		{"garbage token", &client.Client{Token: client.StaticToken("not.a.jwt")}, sub, client.ErrUnauthorized, 401, "invalid_token"},
		{"unsupported matcher type", &client.Client{Token: client.StaticToken(mustToken(t, signer, mercure.Grant{Subject: "s", Subscribe: []mercure.Match{{Pattern: "*"}}}))},
			client.Subscription{Matchers: []client.Matcher{{Type: "regex", Value: ".*"}}}, client.ErrBadRequest, 400, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := firstError(t, tc.c, th.endpoint(), tc.sub)
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("got %v, want %v", err, tc.sentinel)
			}
			var se *client.StatusError
			if !errors.As(err, &se) || se.StatusCode != tc.status {
				t.Fatalf("got %#v", err)
			}
			if tc.challenge == "-" {
				if se.Challenge != nil {
					t.Fatalf("unexpected challenge %+v", se.Challenge)
				}
				return
			}
			if se.Challenge == nil || se.Challenge.Error != tc.challenge || se.Challenge.ResourceMetadata != "https://example.com"+th.MetadataPath() {
				t.Fatalf("challenge %+v", se.Challenge)
			}
		})
	}
}

// A 403 on subscribe, and other 4xx, are final too; 5xx, 429 and a wrong
// media type are told apart (the former retried, the latter final).
func TestSubscribe_StatusHandling(t *testing.T) {
	var calls atomic.Int64
	responses := map[string]func(w http.ResponseWriter){
		"forbidden": func(w http.ResponseWriter) {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", resource_metadata="https://h/m"`)
			w.WriteHeader(403)
		},
		"not found": func(w http.ResponseWriter) { w.WriteHeader(404) },
		"html":      func(w http.ResponseWriter) { w.Header().Set("Content-Type", "text/html"); w.Write([]byte("<p>")) },
		"flaky": func(w http.ResponseWriter) {
			// 503, then 429 with Retry-After 0, then a stream.
			switch calls.Add(1) {
			case 1:
				w.WriteHeader(503)
			case 2:
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(429)
			default:
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte("id: 1\ndata: ok\n\n"))
			}
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		responses[r.URL.Path[1:]](w)
	}))
	defer srv.Close()
	sub := client.Subscription{Matchers: []client.Matcher{client.Wildcard()}}

	err := firstError(t, fastClient(), srv.URL+"/forbidden", sub)
	var se *client.StatusError
	if !errors.Is(err, client.ErrForbidden) || !errors.As(err, &se) || se.Challenge.Error != "insufficient_scope" {
		t.Errorf("forbidden: %v", err)
	}
	if err := firstError(t, fastClient(), srv.URL+"/not%20found", sub); !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("not found: %v", err)
	}
	if err := firstError(t, fastClient(), srv.URL+"/html", sub); !errors.Is(err, client.ErrNotEventStream) {
		t.Errorf("html: %v", err)
	}
	var retries []error
	c := fastClient()
	c.OnRetry = func(err error, _ time.Duration) { retries = append(retries, err) }
	for ev, err := range c.Subscribe(testContext(t, testwait.Deadline), srv.URL+"/flaky", sub) {
		if err != nil || ev.Data != "ok" {
			t.Fatalf("flaky: %v %+v", err, ev)
		}
		break
	}
	if len(retries) != 2 || !errors.As(retries[0], &se) || se.StatusCode != 503 || !errors.As(retries[1], &se) || se.StatusCode != 429 {
		t.Errorf("retries: %v", retries)
	}
}

// The token source is consulted at every connection: a subscriber whose
// short-lived token the hub enforces (AUTH-37 closes the stream at exp)
// renews it and misses nothing. The test runs in a synctest bubble: the
// tokens expire on the bubble's clock, and its 3 s cost no real time.
func TestSubscribe_TokenRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		signer, trust := newSigner(t)
		th, hc := startBubbleHub(t, trust, withHistory(t, 1000))
		var minted atomic.Int64
		c := fastClient()
		c.HTTPClient = hc
		c.Token = func(ctx context.Context) (string, error) {
			minted.Add(1)
			return signer.Token(mercure.Grant{Subject: "worker", TTL: 1500 * time.Millisecond, Subscribe: []mercure.Match{{Pattern: "*"}}})
		}
		topic := []string{"https://example.com/jobs"}
		ctx := testContext(t, 20*time.Second)
		published := make(chan struct{})
		go func() {
			defer close(published)
			for i := range 40 {
				if _, err := th.Publish(ctx, mercure.Update{Topics: topic, ID: "j" + strconv.Itoa(i), Private: i%2 == 0}); err != nil {
					return
				}
				time.Sleep(75 * time.Millisecond) // on the bubble's clock: 3 s of publishing
			}
		}()
		got := collect(t, c.Subscribe(ctx, th.endpoint(), client.Subscription{
			Matchers: []client.Matcher{client.Exact(topic[0])}, LastEventID: client.Earliest,
		}), func(evs []client.Event) bool { return len(evs) == 40 })
		for i, ev := range got {
			if ev.ID != "j"+strconv.Itoa(i) {
				t.Fatalf("event %d: %q", i, ev.ID)
			}
		}
		if minted.Load() < 3 {
			t.Fatalf("minted %d tokens over 3 s of tokens living at most 1.5 s (exp is in whole seconds)", minted.Load())
		}
		<-published
	})
}

// Publish sends every field and returns the hub's id; refusals are typed.
func TestPublish(t *testing.T) {
	signer, trust := newSigner(t)
	th := startSecureHub(t, trust, withHistory(t, 100))
	pub := &client.Client{Token: client.StaticToken(mustToken(t, signer, mercure.Grant{Subject: "p", Publish: []mercure.Match{{Pattern: "https://example.com/books/{:id}", Type: mercure.MatchURLPattern}}}))}
	subscriber := &client.Client{Token: client.StaticToken(mustToken(t, signer, mercure.Grant{Subject: "s", Subscribe: []mercure.Match{{Pattern: "*"}}}))}
	ctx := testContext(t, testwait.Deadline)

	id, err := pub.Publish(ctx, th.endpoint(), client.Update{
		Topics: []string{"https://example.com/books/1", "https://example.com/books/2"},
		Data:   "a=b&c+d;%\nline 2", Private: true, ID: "urn:x:1", Type: "t y", Retry: ptr(1500 * time.Millisecond),
	})
	if err != nil || id != "urn:x:1" {
		t.Fatalf("Publish = %q, %v", id, err)
	}
	generated, err := pub.Publish(ctx, th.endpoint(), client.Update{Topics: []string{"https://example.com/books/2"}})
	if err != nil || generated == "" {
		t.Fatalf("Publish = %q, %v", generated, err)
	}
	got := collect(t, subscriber.Subscribe(ctx, th.endpoint(), client.Subscription{
		Matchers: []client.Matcher{client.Exact("https://example.com/books/2")}, LastEventID: client.Earliest,
	}), func(evs []client.Event) bool { return len(evs) == 2 })
	if ev := got[0]; ev.ID != "urn:x:1" || ev.Data != "a=b&c+d;%\nline 2" || ev.Type != "t y" || ev.Retry == nil || *ev.Retry != 1500*time.Millisecond {
		t.Errorf("first event %+v", ev)
	}
	if got[1].ID != generated || got[1].Data != "" {
		t.Errorf("second event %+v", got[1])
	}

	for _, tc := range []struct {
		name      string
		c         *client.Client
		u         client.Update
		sentinel  error
		challenge string
	}{
		{"no token", &client.Client{}, client.Update{Topics: []string{"https://example.com/books/1"}}, client.ErrUnauthorized, ""},
		{"no grant on one topic", pub, client.Update{Topics: []string{"https://example.com/books/1", "https://example.com/authors/1"}}, client.ErrForbidden, "insufficient_scope"},
		{"reserved topic", pub, client.Update{Topics: []string{"/.well-known/mercure/x"}}, client.ErrBadRequest, "-"},
		{"invalid type", pub, client.Update{Topics: []string{"https://example.com/books/1"}, Type: "mercure"}, client.ErrBadRequest, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Publish(ctx, th.endpoint(), tc.u)
			var se *client.StatusError
			if !errors.Is(err, tc.sentinel) || !errors.As(err, &se) {
				t.Fatalf("got %v, want %v", err, tc.sentinel)
			}
			switch {
			case tc.challenge == "-" && se.Challenge != nil:
				t.Errorf("unexpected challenge %+v", se.Challenge)
			case tc.challenge != "-" && (se.Challenge == nil || se.Challenge.Error != tc.challenge):
				t.Errorf("challenge %+v, want error %q", se.Challenge, tc.challenge)
			}
		})
	}
}

// A hub that reads the token from its cookie (AUTH-12): the client's
// HTTPClient carries a cookie jar that the application filled, and the
// subscription gets the private updates the cookie's token grants;
// without the jar it is refused.
func TestSubscribe_CookieJar(t *testing.T) {
	signer, trust := newSigner(t)
	h, err := mercure.New(testHubURL, trust, mercure.WithInsecurePublishing())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Mount(mux)
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		tok, err := signer.Token(mercure.Grant{Subject: "reader", Subscribe: []mercure.Match{{Pattern: "https://example.com/inbox"}}})
		if err == nil {
			err = h.SetCookie(w, tok)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	srv := httptest.NewTLSServer(mux) // the cookie is Secure
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	hubURL := srv.URL + h.Path()
	sub := client.Subscription{Matchers: []client.Matcher{client.Exact("https://example.com/inbox")}, LastEventID: client.Earliest}

	noJar := fastClient()
	noJar.HTTPClient = srv.Client()
	if err := firstError(t, noJar, hubURL, sub); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("without the cookie: %v, want ErrUnauthorized", err)
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := srv.Client()
	hc.Jar = jar
	res, err := hc.Get(srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(jar.Cookies(mustParseURL(t, hubURL))) != 1 {
		t.Fatal("the jar holds no cookie for the hub")
	}
	c := fastClient()
	c.HTTPClient = hc
	for i := range 3 {
		if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/inbox"}, ID: "m" + strconv.Itoa(i), Private: true}); err != nil {
			t.Fatal(err)
		}
	}
	got := collect(t, c.Subscribe(testContext(t, testwait.Deadline), hubURL, sub), func(evs []client.Event) bool { return len(evs) == 3 })
	for i, ev := range got {
		if ev.ID != "m"+strconv.Itoa(i) {
			t.Fatalf("event %d: %q, want m%d", i, ev.ID, i)
		}
	}
}

func mustParseURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A hub answers a refusal that passes (here 429, a connection budget
// spent) to a browser's EventSource as a 200 stream that only says when
// to retry, since an EventSource gives up on any other status; this
// client asks for problem documents as much as for the stream, so it still
// learns the status and the hub's Retry-After.
func TestSubscribe_TemporaryRefusalKeepsItsStatus(t *testing.T) {
	th := startHub(t, mercure.WithAnonymousSubscribers(), mercure.WithLimits(mercure.Limits{MaxConnectionsPerClient: 1}))
	ctx := testContext(t, testwait.Deadline)
	sub := client.Subscription{Matchers: []client.Matcher{client.Exact("https://example.com/a")}}
	// The one stream this client address may hold.
	first, err := http.NewRequestWithContext(ctx, http.MethodGet, th.endpoint()+"?match=urn%3Ax", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(first)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %v %v", res, err)
	}
	defer res.Body.Close()

	c := fastClient()
	retried := make(chan error, 1)
	c.OnRetry = func(err error, _ time.Duration) {
		select {
		case retried <- err:
		default:
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for range c.Subscribe(sctx, th.endpoint(), sub) {
		}
	}()
	var se *client.StatusError
	if err := <-retried; !errors.As(err, &se) || se.StatusCode != http.StatusTooManyRequests || se.RetryAfter != 10*time.Second {
		t.Fatalf("the refusal the client retried: %#v, want a StatusError 429 with Retry-After 10s", err)
	}
}
