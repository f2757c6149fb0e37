package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/examples/internal/browsertest"
	"github.com/mercurekit/mercure/pgstore/pgtest"
	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/storetest"
)

// A short outage of a service the hub depends on must not end a page's
// EventSource for good: an EventSource gives up on any answer but 200,
// so the hub answers its temporary refusals (503 here) with a 200 stream
// that only sets the retry delay (see the root package's retrylater.go).
// These tests take the service down for real, open a page's EventSource
// during the outage, and bring the service back: the EventSource stays
// in CONNECTING, never CLOSED, and gets what is published once the
// service is back.

// outagePage records what its EventSource goes through: the readyState
// at each open and error, and the data of each message. (A stream that
// only says to retry opens, then ends: OPEN, then CONNECTING.)
const outagePage = `<!doctype html>
<script>
window.got = []; window.states = []; window.opened = 0;
window.subscribe = (url) => {
  const es = new EventSource(url);
  window.es = es;
  es.onopen = () => { window.opened++; window.states.push(es.readyState); };
  es.onerror = () => { window.states.push(es.readyState); };
  es.onmessage = (e) => { window.got.push(e.data); };
};
</script>`

// outageBrowser serves page and hub (at the hub's path) on ln and opens
// the page in Chromium.
func outageBrowser(t *testing.T, ln net.Listener, hub *mercure.Hub, handler http.Handler, setCookie string) *outageTab {
	t.Helper()
	b := startBrowser(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if setCookie != "" {
			w.Header().Add("Set-Cookie", setCookie)
		}
		w.Write([]byte(outagePage))
	})
	mux.Handle(hub.Path(), handler)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { hub.Shutdown(context.Background()) }) // second: it ends the streams srv.Close waits for

	p := &outageTab{t: t, ctx: b.Context(t, 90*time.Second)} // closed first
	p.run("open the page", chromedp.Navigate(srv.URL+"/"), browsertest.WaitJS(`typeof window.subscribe === "function"`))
	return p
}

// outageTab is the outage page open in a browser context of the test's.
type outageTab struct {
	t   *testing.T
	ctx context.Context
}

// run runs steps on the page, failing the test with what the page went
// through if one fails.
func (p *outageTab) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v; the page: %s", what, err, p.state())
	}
}

// state is what the page's EventSource went through, as JSON.
func (p *outageTab) state() string {
	state, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`JSON.stringify({readyState: window.es?.readyState, states: window.states, opened: window.opened, got: window.got})`))
	if err != nil {
		return err.Error()
	}
	return state
}

// waitDeferred waits until hub has answered n subscribes with a stream
// that retries: the second one proves the EventSource came back after
// the first, rather than giving up.
func waitDeferred(t *testing.T, hub *mercure.Hub, n uint64) {
	t.Helper()
	if !storetest.Within(storetest.Deadline, func() bool { return hub.Metrics().SubscribesDeferred >= n }) {
		t.Fatalf("%d subscribes deferred, want %d: the EventSource stopped coming back", hub.Metrics().SubscribesDeferred, n)
	}
}

// publishOnceBack publishes u as soon as the hub accepts it again (it
// refuses publishes while the store's live feed is down).
func publishOnceBack(t *testing.T, hub *mercure.Hub, u mercure.Update) string {
	t.Helper()
	var id string
	var err error
	if !storetest.Within(storetest.Deadline, func() bool {
		id, err = hub.Publish(context.Background(), u)
		return err == nil
	}) {
		t.Fatalf("Publish after the store came back: %v", err)
	}
	return id
}

// neverClosed is the page's check that its EventSource never reached
// CLOSED (readyState 2), which would be for good.
const neverClosed = `window.es.readyState !== 2 && !window.states.includes(2)`

// The standalone hub on Redis, Redis killed: a page's EventSource that
// resumes from an id (a replay: history is unavailable) is told to retry,
// keeps retrying through the outage, and once Redis is back resumes
// exactly: it gets the update published after, and nothing twice.
func TestBrowser_EventSourceSurvivesRedisOutage(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t, true) // persistent: the history outlives the kill
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := configure([]string{"-addr", ln.Addr().String(), "-anonymous", "-store", "redis://" + rs.Addr + "/0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if s.closeStore != nil {
		t.Cleanup(func() { s.closeStore() })
	}
	page := outageBrowser(t, ln, s.hub, s.handler, "")
	const topic = "https://example.com/orders/1"
	before := publishOnceBack(t, s.hub, mercure.Update{Topics: []string{topic}, Data: "before"})

	rs.Kill()
	// A page rendered with the id of what it showed subscribes from there.
	q := url.Values{"match": {topic}, "last_event_id": {before}}
	page.run("subscribe during the outage", browsertest.Script(`window.subscribe(`+browsertest.JSString(s.hub.Path()+"?"+q.Encode())+`)`))
	waitDeferred(t, s.hub, 2)
	page.run("the EventSource is alive", browsertest.WaitJS(neverClosed+` && window.states.length >= 4 && window.got.length === 0`))

	rs.Start()
	publishOnceBack(t, s.hub, mercure.Update{Topics: []string{topic}, Data: "after"})
	page.run("the update published after the outage arrives, and only it", browsertest.WaitJS(`window.got.join(",") === "after"`), browsertest.WaitJS(neverClosed))
}

// An application's session Authorizer that queries PostgreSQL, the
// server stopped: the page's EventSource is told to retry ("authorization
// is unavailable"), keeps retrying, and once PostgreSQL is back gets its
// stream and the private update published for its user.
func TestBrowser_EventSourceSurvivesSessionDatabaseOutage(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE sessions (id text PRIMARY KEY, subject text NOT NULL, topic text NOT NULL);
		INSERT INTO sessions VALUES ('s1', 'alice', 'https://example.com/users/alice/*')`); err != nil {
		t.Fatal(err)
	}
	authorize := func(r *http.Request) (*mercure.Access, error) {
		c, err := r.Cookie("app_session")
		if err != nil {
			return nil, nil
		}
		var subject, topic string
		err = pool.QueryRow(r.Context(), `SELECT subject, topic FROM sessions WHERE id = $1`, c.Value).Scan(&subject, &topic)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, nil
		case err != nil:
			return nil, err // the database is down: a temporary failure
		}
		return &mercure.Access{Subject: subject, Subscribe: []mercure.Match{{Pattern: topic, Type: mercure.MatchURLPattern}}}, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub, err := mercure.New("http://"+ln.Addr().String()+"/.well-known/mercure",
		mercure.WithAuthorizer(authorize, time.Minute), mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	page := outageBrowser(t, ln, hub, hub, "app_session=s1; Path=/; HttpOnly; SameSite=Lax")
	const topic = "https://example.com/users/alice/inbox"

	pg.Stop()
	page.run("subscribe during the outage", browsertest.Script(`window.subscribe(`+browsertest.JSString(hub.Path()+"?match="+url.QueryEscape(topic))+`)`))
	waitDeferred(t, hub, 2)
	page.run("the EventSource is alive", browsertest.WaitJS(neverClosed+` && window.states.length >= 4 && window.got.length === 0`))

	opened := hub.Metrics().StreamsOpened
	pg.Start()
	// The Authorizer refuses before a stream is opened. StreamsOpened, not
	// Stats().Streams: a stream counts there a moment before it receives
	// updates.
	if !storetest.Within(storetest.Deadline, func() bool { return hub.Metrics().StreamsOpened > opened }) {
		t.Fatalf("no stream opened once PostgreSQL was back: %+v, %s", hub.Metrics(), page.state())
	}
	if _, err := hub.Publish(ctx, mercure.Update{Topics: []string{topic}, Data: "for alice", Private: true}); err != nil {
		t.Fatal(err)
	}
	page.run("the private update arrives", browsertest.WaitJS(`window.got.join(",") === "for alice"`), browsertest.WaitJS(neverClosed))
}
