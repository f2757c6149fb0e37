package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"log"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mercurekit/mercure"
)

//go:embed index.html
var indexHTML []byte

// users are the board's fixed accounts.
var users = []string{"alice", "bob", "carol"}

// sessionCookie holds the id of the user's session, a random string the
// app maps to the user on the server: logging out deletes the session,
// whatever the browser keeps.
const sessionCookie = "demo_session"

// sessionTTL is how long a session lasts.
const sessionTTL = 8 * time.Hour

// DefaultRecheck is how often the hub asks the app again whether the
// session behind a stream still grants it: a logged-out user's streams
// end within this interval.
const DefaultRecheck = 10 * time.Second

// Task is one card of the board.
type Task struct {
	ID       int    `json:"id"`
	Title    string `json:"title"`
	Assignee string `json:"assignee,omitempty"`
}

// app is the task board: its state, its sessions, its embedded hub and
// the signer of its scripts' tokens.
type app struct {
	origin string // http://ADDR, also the token issuer
	hub    *mercure.Hub
	signer *mercure.Signer
	mux    *http.ServeMux

	mu     sync.Mutex
	tasks  []*Task
	nextID int

	sessMu   sync.Mutex
	sessions map[string]session // by id
}

// session is a logged-in user.
type session struct {
	user    string
	expires time.Time
}

// newApp builds the board served at origin (http://host:port). The
// browser's streams are authorized by the app's own session, asked again
// every recheck; scripts publish over HTTP with tokens, signed by a fresh
// ECDSA P-256 key.
func newApp(origin string, recheck time.Duration) (*app, error) {
	a := &app{origin: origin, mux: http.NewServeMux(), nextID: 1, sessions: make(map[string]session)}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	// The hub verifies with the public key; the signer holds the private
	// one. A real app would read them from its configuration, as PEM
	// (mercure.PEM) for instance.
	keys, err := mercure.Keys(priv.Public())
	if err != nil {
		return nil, err
	}
	a.hub, err = mercure.New(
		origin+mercure.DefaultHubPath,
		// Browsers: the app's session decides, no token to mint.
		mercure.WithAuthorizer(a.authorize, recheck),
		// Scripts: publisher tokens (see scriptToken).
		mercure.WithIssuer(mercure.Issuer{ID: origin, PublisherKeys: keys}),
		mercure.WithSubscriptions(),
		// The hub's page for developers, at /.well-known/mercure/debug/:
		// it sees what the user's session grants (see authorize).
		mercure.WithDebugger(),
	)
	if err != nil {
		return nil, err
	}
	if a.signer, err = mercure.NewSigner(priv, origin, a.hub.URL()); err != nil {
		return nil, err
	}
	a.hub.Mount(a.mux)
	a.mux.HandleFunc("GET /{$}", a.index)
	a.mux.HandleFunc("POST /login", a.login)
	a.mux.HandleFunc("POST /logout", a.logout)
	a.mux.HandleFunc("GET /me", a.me)
	a.mux.HandleFunc("GET /tasks", a.listTasks)
	a.mux.HandleFunc("POST /tasks", a.createTask)
	a.mux.HandleFunc("POST /tasks/{id}/assign", a.assignTask)
	return a, nil
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Topics.
func (a *app) boardTopic() string      { return a.origin + "/tasks" }
func (a *app) taskTopic(id int) string { return a.origin + "/tasks/" + strconv.Itoa(id) }
func (a *app) notificationTopic(user string) string {
	return a.origin + "/users/" + user + "/notifications"
}

// subscriptionsPattern matches the hub's subscription topics and its
// subscriptions web API, relative to the hub URL.
const subscriptionsPattern = mercure.DefaultHubPath + "/subscriptions{/*}?"

func (a *app) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(indexHTML)
}

// user returns the user of the request's session, or "".
func (a *app) user(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	a.sessMu.Lock()
	defer a.sessMu.Unlock()
	s, ok := a.sessions[c.Value]
	if !ok || time.Now().After(s.expires) {
		return ""
	}
	return s.user
}

// authorize is the hub's Authorizer: what the user of the request's
// session may receive. The hub asks again while the user's streams are
// open: once the session is gone, they end.
func (a *app) authorize(r *http.Request) (*mercure.Access, error) {
	name := a.user(r)
	if name == "" {
		return nil, nil
	}
	c, _ := r.Cookie(sessionCookie) // there is one: user found its session
	return &mercure.Access{
		Subject: name,
		Session: c.Value, // for EndStreams at logout
		Subscribe: []mercure.Match{
			// The board (public anyway), and the user's private
			// notifications.
			{Pattern: a.origin + "/tasks{/*}?", Type: mercure.MatchURLPattern},
			{Pattern: a.notificationTopic(name)},
			// Presence: the subscription events and the web API.
			{Pattern: mercure.DefaultHubPath + "/subscriptions/:type/:match/:subscriber", Type: mercure.MatchURLPattern},
			{Pattern: subscriptionsPattern, Type: mercure.MatchURLPattern},
			// The debugger's activity chart.
			{Pattern: mercure.DefaultHubPath + "/debug/activity"},
		},
		// Names the user in the events of their subscriptions.
		Payload: map[string]string{"user": name},
	}, nil
}

// login opens a session for the user: the hub reads it too, through
// authorize.
func (a *app) login(w http.ResponseWriter, r *http.Request) {
	name := r.FormValue("user")
	if !slices.Contains(users, name) {
		http.Error(w, "unknown user", http.StatusBadRequest)
		return
	}
	id := rand.Text()
	expires := time.Now().Add(sessionTTL)
	a.sessMu.Lock()
	a.sessions[id] = session{user: name, expires: expires}
	a.sessMu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Expires: expires,
	})
	writeJSON(w, http.StatusOK, a.config(name))
}

// logout ends the session, then its streams, at once, on every instance
// sharing the hub's store; their reconnections are refused.
func (a *app) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		a.sessMu.Lock()
		delete(a.sessions, c.Value)
		a.sessMu.Unlock()
		if err := a.hub.EndStreams(r.Context(), mercure.StreamFilter{Session: c.Value}); err != nil {
			// This instance's streams ended; the others' end at their
			// next re-check.
			log.Printf("ending the session's streams: %v", err)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// scriptToken mints a token with which a script (see main) sends users
// notifications through the hub's HTTP publish endpoint.
func (a *app) scriptToken(ttl time.Duration) (string, error) {
	return a.signer.Token(mercure.Grant{
		Subject: "notifier-script",
		Publish: []mercure.Match{{Pattern: a.origin + "/users/:user/notifications", Type: mercure.MatchURLPattern}},
		TTL:     ttl,
	})
}

// config is what the page needs to subscribe.
func (a *app) config(name string) map[string]string {
	return map[string]string{
		"user":          name,
		"hub":           a.hub.URL(),
		"board":         a.boardTopic(),
		"notifications": a.notificationTopic(name),
		"subscriptions": subscriptionsPattern,
	}
}

func (a *app) me(w http.ResponseWriter, r *http.Request) {
	name := a.user(r)
	if name == "" {
		http.Error(w, "not logged in", http.StatusUnauthorized)
		return
	}
	writeJSON(w, http.StatusOK, a.config(name))
}

func (a *app) listTasks(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Under the lock: no update about these tasks can slip between the
	// cursor and the list.
	if err := a.hub.Link(w.Header(), mercure.Link{Topic: a.boardTopic(), LastEventID: true}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := make([]Task, 0, len(a.tasks))
	for _, t := range a.tasks {
		list = append(list, *t)
	}
	writeJSON(w, http.StatusOK, list)
}

func (a *app) createTask(w http.ResponseWriter, r *http.Request) {
	by := a.user(r)
	if by == "" {
		http.Error(w, "not logged in", http.StatusUnauthorized)
		return
	}
	title := strings.TrimSpace(r.FormValue("title"))
	if title == "" || len(title) > 200 {
		http.Error(w, "a title of 1 to 200 bytes is required", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &Task{ID: a.nextID, Title: title}
	a.nextID++
	a.tasks = append(a.tasks, t)
	if err := a.publishTask(r, t); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

func (a *app) assignTask(w http.ResponseWriter, r *http.Request) {
	by := a.user(r)
	if by == "" {
		http.Error(w, "not logged in", http.StatusUnauthorized)
		return
	}
	assignee := r.FormValue("assignee")
	if !slices.Contains(users, assignee) {
		http.Error(w, "unknown assignee", http.StatusBadRequest)
		return
	}
	id, _ := strconv.Atoi(r.PathValue("id"))
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.IndexFunc(a.tasks, func(t *Task) bool { return t.ID == id })
	if i < 0 {
		http.Error(w, "no such task", http.StatusNotFound)
		return
	}
	t := a.tasks[i]
	t.Assignee = assignee
	if err := a.publishTask(r, t); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	note, _ := json.Marshal(map[string]any{
		"kind": "notification",
		"text": by + " assigned you “" + t.Title + "”",
		"task": t,
	})
	if _, err := a.hub.Publish(context.WithoutCancel(r.Context()), mercure.Update{
		Topics:  []string{a.notificationTopic(assignee)},
		Data:    string(note),
		Private: true, // only the assignee's session grants this topic
	}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// publishTask publishes the public update about t; a.mu is held.
func (a *app) publishTask(r *http.Request, t *Task) error {
	data, _ := json.Marshal(map[string]any{"kind": "task", "task": t})
	_, err := a.hub.Publish(context.WithoutCancel(r.Context()), mercure.Update{
		Topics: []string{a.taskTopic(t.ID), a.boardTopic()},
		Data:   string(data),
	})
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
