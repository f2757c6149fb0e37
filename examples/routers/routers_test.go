package routers_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/storetest"
)

// The root package's routes_test.go checks the same for net/http's
// ServeMux and proxies; these are the routers it leaves to this module.
const (
	hubURL         = "https://example.com/.well-known/mercure"
	prefixedHubURL = "https://example.com/api/realtime/.well-known/mercure"
	issuerID       = "https://issuer.example.com"
)

var routingCases = []struct {
	name   string
	hubURL string
	app    func(t *testing.T, h *mercure.Hub) http.Handler
}{
	{"chi/Mount", hubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		r := chi.NewRouter()
		h.Mount(r)
		return r
	}},
	{"chi/Mount/prefix", prefixedHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		r := chi.NewRouter()
		h.Mount(r)
		return r
	}},
	{"chi/Route/Mount", prefixedHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		r := chi.NewRouter()
		r.Route("/api/realtime", func(r chi.Router) { r.Mount("/.well-known/mercure", h) })
		r.Handle(h.MetadataPath(), h)
		return r
	}},
	{"chi/Route/Handle", prefixedHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		r := chi.NewRouter()
		r.Route("/api/realtime", func(r chi.Router) {
			r.Handle("/.well-known/mercure", h)
			r.Handle("/.well-known/mercure/*", h)
		})
		r.Handle(h.MetadataPath(), h)
		return r
	}},
	{"chi/subrouter", prefixedHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		sub := chi.NewRouter()
		sub.Handle("/.well-known/mercure", h)
		sub.Handle("/.well-known/mercure/*", h)
		r := chi.NewRouter()
		r.Mount("/api/realtime", sub)
		r.Handle(h.MetadataPath(), h)
		return r
	}},
	{"chi/StripPrefix", prefixedHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		r := chi.NewRouter()
		r.Handle("/api/realtime/*", http.StripPrefix("/api/realtime", h))
		r.Handle(h.MetadataPath(), h)
		return r
	}},
	{"gorilla/PathPrefix", hubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		r := mux.NewRouter().UseEncodedPath()
		r.PathPrefix(h.Path()).Handler(h)
		r.Handle(h.MetadataPath(), h)
		return r
	}},
	{"gorilla/Subrouter", prefixedHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		r := mux.NewRouter().UseEncodedPath()
		r.PathPrefix("/api/realtime").Subrouter().PathPrefix("/.well-known/mercure").Handler(h)
		r.Handle(h.MetadataPath(), h)
		return r
	}},
	{"gorilla/StripPrefix", prefixedHubURL, func(t *testing.T, h *mercure.Hub) http.Handler {
		r := mux.NewRouter().UseEncodedPath()
		r.PathPrefix("/api/realtime/").Handler(http.StripPrefix("/api/realtime", h))
		r.Handle(h.MetadataPath(), h)
		return r
	}},
}

// The hub serves its stream, publication, subscriptions API and metadata
// wherever chi or gorilla/mux route it, with and without a prefix, behind
// http.StripPrefix. Identifiers (subscription ids, the metadata's
// resource) are those of the public URL throughout.
func TestRouting(t *testing.T) {
	for _, c := range routingCases {
		t.Run(c.name, func(t *testing.T) {
			a := newAuth(t)
			h, err := mercure.New(c.hubURL, mercure.WithInsecurePublishing(), a.option(),
				mercure.WithAnonymousSubscribers(), mercure.WithSubscriptions())
			if err != nil {
				t.Fatal(err)
			}
			srv := serve(t, h, c.app(t, h))
			tok := a.subscriberToken(t, c.hubURL)
			get := func(path string) (int, string) {
				t.Helper()
				return getWith(t, srv.URL+path, "Authorization", "Bearer "+tok)
			}

			// The stream and publication.
			const topic = "https://example.com/books/1" // its escaped form holds %2F
			s := storetest.Subscribe(t, srv, h.Path(), "match="+url.QueryEscape(topic), "")
			res, err := http.PostForm(srv.URL+h.Path(), url.Values{"topic": {topic}})
			if err != nil {
				t.Fatal(err)
			}
			id, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("publish: %d %s", res.StatusCode, id)
			}
			select {
			case got := <-s.IDs:
				if got != string(id) {
					t.Fatalf("stream got %s, want %s", got, id)
				}
			case <-time.After(storetest.Deadline):
				t.Fatal("no event on the stream")
			}

			// The subscriptions API: the collection, one matcher's, one.
			api := h.Path() + "/subscriptions"
			status, body := get(api)
			var coll struct {
				ID            string                 `json:"id"`
				Subscriptions []mercure.Subscription `json:"subscriptions"`
			}
			if status != http.StatusOK || json.Unmarshal([]byte(body), &coll) != nil || coll.ID != api || len(coll.Subscriptions) != 1 {
				t.Fatalf("GET %s: %d %s", api, status, body)
			}
			one := coll.Subscriptions[0]
			matcher := api + "/exact/https%3A%2F%2Fexample.com%2Fbooks%2F1"
			if !strings.HasPrefix(one.ID, matcher+"/") {
				t.Fatalf("subscription id %q, want it under %s", one.ID, matcher)
			}
			if status, body := get(matcher); status != http.StatusOK || !strings.Contains(body, `"id":"`+matcher+`"`) {
				t.Errorf("GET %s: %d %s", matcher, status, body)
			}
			if status, body := get(one.ID); status != http.StatusOK || !strings.Contains(body, `"id":"`+one.ID+`"`) {
				t.Errorf("GET %s: %d %s", one.ID, status, body)
			}

			// The protected resource metadata, at the root of the host.
			status, body = get(h.MetadataPath())
			var meta struct {
				Resource string `json:"resource"`
			}
			if status != http.StatusOK || json.Unmarshal([]byte(body), &meta) != nil || meta.Resource != c.hubURL {
				t.Errorf("GET %s: %d %s", h.MetadataPath(), status, body)
			}
		})
	}
}

// An application that guards the subscriptions API and the debugger at
// their paths (admins only) keeps them guarded: no other path that chi's
// Mount, gorilla's PathPrefix or http.StripPrefix hands the hub reaches
// them.
func TestRouting_GuardedPaths(t *testing.T) {
	for _, c := range routingCases {
		t.Run(c.name, func(t *testing.T) {
			a := newAuth(t)
			h, err := mercure.New(c.hubURL, a.option(), mercure.WithSubscriptions(), mercure.WithDebugger(), mercure.WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			H := h.Path()
			adminsOnly := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					p := r.URL.Path
					if (strings.HasPrefix(p, H+"/subscriptions") || strings.HasPrefix(p, H+"/debug")) && r.Header.Get("X-Admin") != "yes" {
						http.Error(w, "admins only", http.StatusForbidden)
						return
					}
					next.ServeHTTP(w, r)
				})
			}
			srv := serve(t, h, adminsOnly(c.app(t, h)))
			tok := a.subscriberToken(t, c.hubURL)
			get := func(path string, admin bool) int {
				t.Helper()
				hdr := []string{"Authorization", "Bearer " + tok}
				if admin {
					hdr = append(hdr, "X-Admin", "yes")
				}
				status, _ := getWith(t, srv.URL+path, hdr...)
				return status
			}
			// The guard works where it is put, and the admin gets through.
			for _, p := range []string{H + "/subscriptions", H + "/debug/"} {
				if got := get(p, false); got != http.StatusForbidden {
					t.Errorf("GET %s, not an admin: %d, want 403", p, got)
				}
				if got := get(p, true); got != http.StatusOK {
					t.Errorf("GET %s, an admin: %d, want 200", p, got)
				}
			}
			lead, _ := strings.CutSuffix(H, "/.well-known/mercure") // "/api/realtime" or ""
			for _, p := range []string{
				H + H + "/subscriptions",
				H + "/mercure/subscriptions",
				H + "/x" + H + "/subscriptions",
				lead + "/subscriptions",
				lead + "/mercure/subscriptions",
				lead + H + "/subscriptions",
				"/internal" + H + "/subscriptions",
				H + H + "/debug/",
				lead + "/debug/",
				lead + "/mercure/debug/",
				lead + H + "/debug/",
			} {
				if got := get(p, false); got == http.StatusOK {
					t.Errorf("GET %s, not an admin: 200, want the guard's 403 or a 404", p)
				}
			}
		})
	}
}

// serve serves h through handler until the test ends.
func serve(t *testing.T, h *mercure.Hub, handler http.Handler) *httptest.Server {
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		srv.Close()
	})
	return srv
}

// getWith sends a GET with the header's name, value pairs.
func getWith(t *testing.T, u string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// auth is an issuer whose subscriber tokens the hub trusts.
type auth struct{ key *ecdsa.PrivateKey }

func newAuth(t *testing.T) auth {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return auth{k}
}

func (a auth) option() mercure.Option {
	key, err := jwk.Import(&a.key.PublicKey)
	if err != nil {
		panic(err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(key); err != nil {
		panic(err)
	}
	return mercure.WithIssuer(mercure.Issuer{ID: issuerID, SubscriberKeys: set})
}

// subscriberToken is an ES256 access token (RFC 9068) for aud that lets
// its holder subscribe to every topic.
func (a auth) subscriberToken(t *testing.T, aud string) string {
	t.Helper()
	now := time.Now()
	claims := map[string]any{
		"iss": issuerID, "aud": aud, "sub": "user-1", "client_id": "client-1",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": fmt.Sprint(now.UnixNano()),
		"authorization_details": []any{map[string]any{
			"type":    "https://mercure.rocks/authorization-detail",
			"actions": []any{"subscribe"},
			"topics":  []any{map[string]any{"match": "*"}},
		}},
	}
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(map[string]any{"alg": "ES256", "typ": "at+jwt"}) + "." + enc(claims)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, a.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}
