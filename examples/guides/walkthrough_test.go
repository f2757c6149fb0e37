package guides_test

// The program of docs/walkthrough.md, verbatim: Example_walkthrough runs
// it with net/http's ServeMux and with chi.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mercurekit/mercure"
)

type user struct{ Name, SessionID string }

// sessions maps a session id to its user's name.
var sessions = struct {
	sync.Mutex
	byID map[string]string
}{byID: map[string]string{}}

func currentUser(r *http.Request) *user {
	c, err := r.Cookie("session")
	if err != nil {
		return nil
	}
	sessions.Lock()
	defer sessions.Unlock()
	if name, ok := sessions.byID[c.Value]; ok {
		return &user{Name: name, SessionID: c.Value}
	}
	return nil
}

func login(w http.ResponseWriter, r *http.Request) {
	name := r.FormValue("name") // a real application checks a password
	id := rand.Text()
	sessions.Lock()
	sessions.byID[id] = name
	sessions.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "session", Value: id, Path: "/",
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
}

func newHub() (*mercure.Hub, error) {
	return mercure.New("https://example.com/.well-known/mercure",
		mercure.WithAuthorizer(func(r *http.Request) (*mercure.Access, error) {
			u := currentUser(r)
			if u == nil {
				return nil, nil // no session: anonymous
			}
			return &mercure.Access{
				Subject:   u.Name,
				Session:   u.SessionID, // for EndStreams at logout
				Subscribe: []mercure.Match{{Pattern: "https://example.com/users/" + u.Name + "/{*}?", Type: mercure.MatchURLPattern}},
			}, nil
		}, time.Minute), // each session is checked again every minute
		mercure.WithAnonymousSubscribers(), // public updates for visitors
	)
}

func routes(hub *mercure.Hub) *http.ServeMux {
	mux := http.NewServeMux()
	hub.Mount(mux) // GET /.well-known/mercure subscribes; and the hub's other routes
	mux.HandleFunc("POST /login", login)
	mux.HandleFunc("POST /logout", logout(hub))
	mux.HandleFunc("POST /users/{name}/messages", sendMessage(hub))
	return mux
}

func chiRoutes(hub *mercure.Hub) http.Handler {
	r := chi.NewRouter()
	hub.Mount(r)
	r.Post("/login", login)
	r.Post("/logout", logout(hub))
	r.Post("/users/{name}/messages", sendMessage(hub))
	return r
}

func sendMessage(hub *mercure.Hub) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		from := currentUser(r)
		if from == nil {
			http.Error(w, "log in first", http.StatusUnauthorized)
			return
		}
		// ... store the message, then tell the recipient's tabs:
		data, _ := json.Marshal(map[string]string{"from": from.Name, "text": r.FormValue("text")})
		_, err := hub.Publish(r.Context(), mercure.Update{
			Topics:  []string{"https://example.com/users/" + r.PathValue("name") + "/inbox"},
			Data:    string(data),
			Private: true, // only the streams whose session grants this topic
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func logout(hub *mercure.Hub) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if u := currentUser(r); u != nil {
			sessions.Lock()
			delete(sessions.byID, u.SessionID) // first the session ends,
			sessions.Unlock()
			hub.EndStreams(r.Context(), mercure.StreamFilter{Session: u.SessionID}) // then its streams
		}
		http.SetCookie(w, &http.Cookie{Name: "session", Path: "/", MaxAge: -1})
	}
}

func main() {
	hub, err := newHub()
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: ":8080", Handler: routes(hub), ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(func() { hub.Shutdown(context.Background()) })
	log.Fatal(srv.ListenAndServe())
}

var _ = main // the walk-through's program: Example_walkthrough runs its parts

// Example_walkthrough runs docs/walkthrough.md: Bob sends Alice a message,
// her inbox stream receives it (and Bob's, on her topic, would not: the
// update is private), and her logout ends her stream.
func Example_walkthrough() {
	hub, err := newHub()
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	for _, router := range []struct {
		name    string
		handler http.Handler
	}{{"net/http", routes(hub)}, {"chi", chiRoutes(hub)}} {
		srv := httptest.NewServer(router.handler)
		alice, bob := walkLogin(srv, "alice"), walkLogin(srv, "bob")

		inbox := walkStream(srv, "https://example.com/users/alice/inbox", alice)
		walkPost(srv, "/users/alice/messages", bob, "text=hi")
		fmt.Printf("%s: alice's inbox: %s\n", router.name, walkData(inbox))

		walkPost(srv, "/logout", alice, "")
		_, err := io.Copy(io.Discard, inbox.Body) // the stream ends
		fmt.Printf("%s: after logout, alice's stream ended (%v)\n", router.name, err)
		inbox.Body.Close()
		srv.Close()
	}
	// Output:
	// net/http: alice's inbox: {"from":"bob","text":"hi"}
	// net/http: after logout, alice's stream ended (<nil>)
	// chi: alice's inbox: {"from":"bob","text":"hi"}
	// chi: after logout, alice's stream ended (<nil>)
}

// walkLogin logs name in and returns its session cookie.
func walkLogin(srv *httptest.Server, name string) *http.Cookie {
	res, err := http.PostForm(srv.URL+"/login", url.Values{"name": {name}})
	if err != nil {
		log.Fatal(err)
	}
	res.Body.Close()
	return res.Cookies()[0]
}

// walkPost posts form to path with the session cookie, as a page of the
// application's own origin does.
func walkPost(srv *httptest.Server, path string, session *http.Cookie, form string) {
	req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(session)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode >= 300 {
		log.Fatalf("POST %s: %s", path, res.Status)
	}
}

// walkStream opens the stream an EventSource of the application's pages
// opens for topic, with the session cookie if any.
func walkStream(srv *httptest.Server, topic string, session *http.Cookie) *http.Response {
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/.well-known/mercure?match="+url.QueryEscape(topic), nil)
	if session != nil {
		req.AddCookie(session)
		req.Header.Set("Sec-Fetch-Site", "same-origin") // as a browser sends it from the application's pages
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

// walkData returns the data of the stream's next event.
func walkData(res *http.Response) string {
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return data
		}
	}
	log.Fatalf("stream ended: %v", sc.Err())
	return ""
}
