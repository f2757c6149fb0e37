package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/examples/internal/netcut"
	"github.com/mercurekit/mercure/storetest"
)

// testRecheck is how often the hub re-checks sessions in the tests: often,
// so that a logout ends streams soon.
const testRecheck = 50 * time.Millisecond

// startApp serves a fresh board on a random local port.
func startApp(t *testing.T) (*app, *httptest.Server) {
	t.Helper()
	return startAppAt(t, "127.0.0.1")
}

// startAppAt serves the app with the origin http://host:PORT, host naming
// the loopback listener (127.0.0.1 or localhost).
func startAppAt(t *testing.T, host string) (*app, *httptest.Server) {
	t.Helper()
	return startAppWith(t, host, nil)
}

// startAppWith is startAppAt with the app's handler wrapped by wrap, if
// not nil.
func startAppWith(t *testing.T, host string, wrap func(http.Handler) http.Handler) (*app, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cl := &netcut.Listener{Listener: srv.Listener}
	srv.Listener = cl
	listeners.Store(srv, cl)
	a, err := newApp(strings.Replace("http://"+srv.Listener.Addr().String(), "127.0.0.1", host, 1), testRecheck)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = a
	if wrap != nil {
		srv.Config.Handler = wrap(a)
	}
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.hub.Shutdown(ctx)
		srv.Close()
	})
	return a, srv
}

// login logs name in and returns the cookies the browser would keep.
func login(t *testing.T, srv *httptest.Server, name string) []*http.Cookie {
	t.Helper()
	resp, err := http.PostForm(srv.URL+"/login", url.Values{"user": {name}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login %s: %s", name, resp.Status)
	}
	return resp.Cookies()
}

// do sends a request carrying cookies and fails the test unless it gets want.
func do(t *testing.T, method, u string, form url.Values, cookies []*http.Cookie, want int) *http.Response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, c := range cookies {
		req.AddCookie(c) // as a browser would: the Secure flag is the browser's business
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: %s %s", method, u, resp.Status, b)
	}
	return resp
}

var lastEventIDRe = regexp.MustCompile(`rel="mercure"; last-event-id="([^"]*)"`)

// cursor returns the last-event-id of the Link header of GET /tasks.
func cursor(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	resp := do(t, http.MethodGet, srv.URL+"/tasks", nil, nil, http.StatusOK)
	resp.Body.Close()
	for _, l := range resp.Header.Values("Link") {
		if m := lastEventIDRe.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no last-event-id in %q", resp.Header.Values("Link"))
	return ""
}

type sseEvent struct{ id, typ, data string }

// stream is an open subscription read event by event.
type stream struct {
	events chan sseEvent
}

// subscribe opens a stream on the hub with the given cookies and query,
// like the page's EventSource, and returns once the hub answered.
func subscribe(t *testing.T, a *app, cookies []*http.Cookie, q url.Values) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.hub.URL()+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	// As the board's own page sends it: the hub refuses session streams
	// from other sites.
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		resp.Body.Close()
		t.Fatalf("subscribe: %s", resp.Status)
	}
	s := &stream{events: make(chan sseEvent, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var e sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data != nil {
					e.data = strings.Join(data, "\n")
					if e.typ == "" {
						e.typ = "message"
					}
					s.events <- e
				}
				e, data = sseEvent{}, nil
			case strings.HasPrefix(line, "id: "):
				e.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return s
}

// ended waits until the hub ends the stream, skipping its events.
func (s *stream) ended(t *testing.T) {
	t.Helper()
	timeout := time.After(storetest.Deadline)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("the stream did not end within %v", storetest.Deadline)
		}
	}
}

// next returns the stream's next event.
func (s *stream) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			t.Fatal("stream ended")
		}
		return e
	case <-time.After(storetest.Deadline):
		t.Fatalf("no event within %v", storetest.Deadline)
	}
	return sseEvent{}
}

// message decodes the data of the next event, which must be a message.
func (s *stream) message(t *testing.T) map[string]any {
	t.Helper()
	e := s.next(t)
	if e.typ != "message" {
		t.Fatalf("event type %q, want message: %s", e.typ, e.data)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(e.data), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func cookieNamed(cs []*http.Cookie, name string) *http.Cookie {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestLoginSetsSession: login opens a session, in a random, HttpOnly
// cookie; there is no hub cookie to set, the hub asks the app.
func TestLoginSetsSession(t *testing.T) {
	_, srv := startApp(t)
	cs := login(t, srv, "alice")
	if hc := cookieNamed(cs, mercure.DefaultCookieName); hc != nil {
		t.Errorf("a hub cookie %+v: the session authorizes the hub", hc)
	}
	sc := cookieNamed(cs, sessionCookie)
	if sc == nil || len(sc.Value) < 16 || sc.Value == "alice" || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie %+v", sc)
	}
	resp, err := http.PostForm(srv.URL+"/login", url.Values{"user": {"mallory"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown user: %s", resp.Status)
	}
}

func TestListHasLinks(t *testing.T) {
	a, srv := startApp(t)
	if got := cursor(t, srv); got != store.Earliest {
		t.Errorf("cursor of an empty board %q", got)
	}
	alice := login(t, srv, "alice")
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"write docs"}}, alice, http.StatusCreated).Body.Close()
	resp := do(t, http.MethodGet, srv.URL+"/tasks", nil, nil, http.StatusOK)
	defer resp.Body.Close()
	links := strings.Join(resp.Header.Values("Link"), ", ")
	if !strings.Contains(links, "<"+a.hub.URL()+`>; rel="mercure"; last-event-id="`) {
		t.Errorf("no mercure link: %s", links)
	}
	if !strings.Contains(links, "<"+a.boardTopic()+`>; rel="self"`) {
		t.Errorf("no self link: %s", links)
	}
	if got := cursor(t, srv); got == store.Earliest || got != a.hub.LastEventID() {
		t.Errorf("cursor %q, hub's last %q", got, a.hub.LastEventID())
	}
	var list []Task
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list) != 1 || list[0].Title != "write docs" {
		t.Errorf("list %+v, %v", list, err)
	}
}

func TestMutationsNeedLogin(t *testing.T) {
	_, srv := startApp(t)
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"x"}}, nil, http.StatusUnauthorized).Body.Close()
	// Streams with neither a session nor a token are refused: the hub has
	// no anonymous subscribers.
	resp, err := http.Get(srv.URL + mercure.DefaultHubPath + "?match=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous stream: %s", resp.Status)
	}
}

func TestCreateDeliversPublicUpdate(t *testing.T) {
	a, srv := startApp(t)
	alice := login(t, srv, "alice")
	s := subscribe(t, a, alice, url.Values{
		"match":         {a.boardTopic()},
		"last_event_id": {cursor(t, srv)},
	})
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"buy milk"}}, alice, http.StatusCreated).Body.Close()
	m := s.message(t)
	task, _ := m["task"].(map[string]any)
	if m["kind"] != "task" || task["title"] != "buy milk" {
		t.Errorf("update %v", m)
	}
}

func TestAssignNotifiesOnlyAssignee(t *testing.T) {
	a, srv := startApp(t)
	alice, bob := login(t, srv, "alice"), login(t, srv, "bob")
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"review PR"}}, alice, http.StatusCreated).Body.Close()
	from := cursor(t, srv)
	// Alice even asks for Bob's notifications: her session does not grant them.
	as := subscribe(t, a, alice, url.Values{
		"match":         {a.boardTopic(), a.notificationTopic("alice"), a.notificationTopic("bob")},
		"last_event_id": {from},
	})
	bs := subscribe(t, a, bob, url.Values{
		"match":         {a.notificationTopic("bob")},
		"last_event_id": {from},
	})
	do(t, http.MethodPost, srv.URL+"/tasks/1/assign", url.Values{"assignee": {"bob"}}, alice, http.StatusOK).Body.Close()
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"marker"}}, alice, http.StatusCreated).Body.Close()

	n := bs.message(t)
	if n["kind"] != "notification" || !strings.Contains(n["text"].(string), "alice assigned you") {
		t.Errorf("bob got %v", n)
	}
	m := as.message(t)
	if task, _ := m["task"].(map[string]any); m["kind"] != "task" || task["assignee"] != "bob" {
		t.Errorf("alice's first event %v, want the assignment", m)
	}
	m = as.message(t)
	if task, _ := m["task"].(map[string]any); m["kind"] != "task" || task["title"] != "marker" {
		t.Errorf("alice's second event %v, want the marker (not bob's notification)", m)
	}
}

func TestPresence(t *testing.T) {
	a, srv := startApp(t)
	alice, bob := login(t, srv, "alice"), login(t, srv, "bob")
	// Bob watches presence; then alice comes online.
	bs := subscribe(t, a, bob, url.Values{
		"match_urlpattern": {subscriptionsPattern},
		"last_event_id":    {a.hub.LastEventID()},
	})
	subscribe(t, a, alice, url.Values{"match": {a.boardTopic()}})

	// The hub API, with alice's cookie, lists her board subscription with
	// her name.
	resp := do(t, http.MethodGet, srv.URL+mercure.DefaultHubPath+"/subscriptions", nil, alice, http.StatusOK)
	var coll struct {
		Subscriptions []mercure.Subscription `json:"subscriptions"`
	}
	err := json.NewDecoder(resp.Body).Decode(&coll)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range coll.Subscriptions {
		if s.Match == a.boardTopic() && s.Active && string(s.Payload) == `{"user":"alice"}` {
			found = true
		}
	}
	if !found {
		t.Errorf("alice's board subscription not listed: %+v", coll.Subscriptions)
	}

	// Bob's stream sees the event of alice's board subscription (after his
	// own presence subscription's).
	for {
		e := bs.next(t)
		if e.typ != "mercure" {
			t.Fatalf("event type %q", e.typ)
		}
		var s mercure.Subscription
		if err := json.Unmarshal([]byte(e.data), &s); err != nil {
			t.Fatal(err)
		}
		if s.Match == a.boardTopic() {
			if !s.Active || string(s.Payload) != `{"user":"alice"}` {
				t.Errorf("presence event %s", e.data)
			}
			break
		}
	}

	// Without a cookie the API is refused.
	do(t, http.MethodGet, srv.URL+mercure.DefaultHubPath+"/subscriptions", nil, nil, http.StatusUnauthorized).Body.Close()
}

// TestLogoutEndsStreams: a logout ends the session's streams (the app
// calls Hub.EndStreams; the next re-check would too), and they cannot
// reconnect.
func TestLogoutEndsStreams(t *testing.T) {
	a, srv := startApp(t)
	alice, bob := login(t, srv, "alice"), login(t, srv, "bob")
	as := subscribe(t, a, alice, url.Values{"match": {a.boardTopic()}})
	bs := subscribe(t, a, bob, url.Values{"match": {a.boardTopic()}})
	do(t, http.MethodPost, srv.URL+"/logout", nil, alice, http.StatusNoContent).Body.Close()
	as.ended(t)
	if got := a.hub.Metrics().StreamsClosed[mercure.CloseRevoked]; got != 1 {
		t.Errorf("%d streams closed as revoked, want 1", got)
	}
	// Her browser would reconnect with the same cookie: refused.
	req, _ := http.NewRequest(http.MethodGet, a.hub.URL()+"?match="+url.QueryEscape(a.boardTopic()), nil)
	for _, c := range alice {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("reconnection after logout: %s", resp.Status)
	}
	// Bob is still logged in: his stream goes on.
	do(t, http.MethodPost, srv.URL+"/tasks", url.Values{"title": {"still here"}}, bob, http.StatusCreated).Body.Close()
	if task, _ := bs.message(t)["task"].(map[string]any); task["title"] != "still here" {
		t.Errorf("bob got %v", task)
	}
}

// TestScriptPublishesWithToken: tokens work beside sessions; a script's
// token publishes the notifications it grants, and nothing else.
func TestScriptPublishesWithToken(t *testing.T) {
	a, srv := startApp(t)
	bob := login(t, srv, "bob")
	bs := subscribe(t, a, bob, url.Values{"match": {a.notificationTopic("bob")}})
	tok, err := a.scriptToken(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(topic string, header ...string) int {
		t.Helper()
		body := url.Values{"topic": {topic}, "private": {"on"}, "data": {`{"kind":"notification","text":"from a script"}`}}
		req, _ := http.NewRequest(http.MethodPost, a.hub.URL(), strings.NewReader(body.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := publish(a.boardTopic(), "Authorization", "Bearer "+tok); got != http.StatusForbidden {
		t.Errorf("script publishing on the board: %d, want 403", got)
	}
	if got := publish(a.notificationTopic("bob")); got != http.StatusUnauthorized {
		t.Errorf("publishing without a token: %d, want 401", got)
	}
	// A session grants no publishing, even from the app's own origin.
	cookie := bob[0].Name + "=" + bob[0].Value
	if got := publish(a.notificationTopic("bob"), "Cookie", cookie, "Origin", a.origin); got != http.StatusForbidden {
		t.Errorf("publishing with a session: %d, want 403", got)
	}
	if got := publish(a.notificationTopic("bob"), "Authorization", "Bearer "+tok); got != http.StatusOK {
		t.Fatalf("script notifying bob: %d, want 200", got)
	}
	if m := bs.message(t); m["text"] != "from a script" {
		t.Errorf("bob got %v", m)
	}
}

// listeners are the cutting listeners of the servers startAppAt started.
var listeners sync.Map // *httptest.Server → *netcut.Listener

// cutConnections closes every connection of srv, the streams the hub took
// over from net/http included (srv.CloseClientConnections does not see
// those).
func cutConnections(srv *httptest.Server) {
	if cl, ok := listeners.Load(srv); ok {
		cl.(*netcut.Listener).Cut()
	}
	srv.CloseClientConnections()
}
