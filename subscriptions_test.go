package mercure_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// subscriptionDoc decodes a subscription event's data (ACT-9), keeping the
// raw member names.
func subscriptionDoc(t testing.TB, ev sseEvent) map[string]any {
	t.Helper()
	if ev.Type != "mercure" {
		t.Fatalf("event type %q, want mercure (ACT-11)", ev.Type)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &doc); err != nil {
		t.Fatalf("data %q: %v", ev.Data, err)
	}
	return doc
}

// watcher subscribes to every subscription event, with a token granting
// subscribe on them (ACT-10).
func watcher(t testing.TB, th *testHub) *subscription {
	t.Helper()
	tok := subToken(t, detail("subscribe", patternTopic("/.well-known/mercure/subscriptions/:type/:match/:subscriber")))
	return th.subscribe("match_urlpattern="+url.QueryEscape("/.well-known/mercure/subscriptions/:type/:match/:subscriber"), "Authorization", "Bearer "+tok)
}

// ACT-2 to ACT-11: one event when a subscription starts and one when it
// ends, with the exact topic (RFC 6570 encoding of ACT-5, here of a matcher
// holding %, :, / and non-ASCII characters) and JSON document.
func TestACT_SubscriptionEvents(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithSubscriptions(), mercure.WithAnonymousSubscribers())
	w := watcher(t, th)
	w.next(t) // the watcher's own subscription

	const match = "https://example.com/caf%C3%A9/ü/:id"
	other := th.subscribe("match_urlpattern=" + url.QueryEscape(match))
	start := w.next(t)
	doc := subscriptionDoc(t, start)
	sub, _ := doc["subscriber"].(string)
	if !strings.HasPrefix(sub, "urn:uuid:") {
		t.Fatalf("subscriber %q is not a random urn:uuid (ACT-7)", sub)
	}
	wantID := "/.well-known/mercure/subscriptions/urlpattern/" +
		"https%3A%2F%2Fexample.com%2Fcaf%25C3%25A9%2F%C3%BC%2F%3Aid/" + strings.ReplaceAll(sub, ":", "%3A")
	want := map[string]any{"id": wantID, "type": "subscription", "match_type": "urlpattern", "match": match, "subscriber": sub, "active": true}
	if !sameDoc(doc, want) {
		t.Fatalf("start event\n %v\nwant\n %v", doc, want)
	}
	if start.ID == wantID || start.ID == "" {
		t.Fatalf("SSE id %q must be a fresh event id, not the topic (ACT-11)", start.ID)
	}
	other.close()
	end := subscriptionDoc(t, w.next(t))
	want["active"] = false
	if !sameDoc(end, want) {
		t.Fatalf("end event\n %v\nwant\n %v", end, want)
	}
}

func sameDoc(got, want map[string]any) bool {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return string(g) == string(w)
}

// ACT-4, ACT-6, ACT-7, AUTH-41: a bare match is exact; two streams with
// one token get different subscriber ids; the payload is that of the
// token's first subscribe detail matching the subscription.
func TestACT_PayloadAndSubscriberIDs(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithSubscriptions())
	w := watcher(t, th)
	w.next(t)
	books := detail("subscribe", patternTopic("https://example.com/books/:id"))
	books["payload"] = map[string]any{"n": 1}
	fallback := detail("subscribe", exactTopic("*"))
	fallback["payload"] = map[string]any{"n": "fallback"}
	tok := subToken(t, books, fallback)

	var subscribers []string
	for _, q := range []string{"match=" + url.QueryEscape("https://example.com/books/1"), "match=" + url.QueryEscape("urn:x")} {
		th.subscribe(q, "Authorization", "Bearer "+tok)
		doc := subscriptionDoc(t, w.next(t))
		if doc["match_type"] != "exact" {
			t.Errorf("match_type %v, want exact for a bare match (ACT-4)", doc["match_type"])
		}
		subscribers = append(subscribers, doc["subscriber"].(string))
		payload, _ := json.Marshal(doc["payload"])
		want := map[string]string{"https://example.com/books/1": `{"n":1}`, "urn:x": `{"n":"fallback"}`}[doc["match"].(string)]
		if string(payload) != want {
			t.Errorf("match %v: payload %s, want %s", doc["match"], payload, want)
		}
	}
	if subscribers[0] == subscribers[1] {
		t.Errorf("two streams with one token share the subscriber id %q", subscribers[0])
	}
	// The subscriber id never comes from the client (ACT-6).
	th.subscribe("match=x&subscriber=urn:evil", "Authorization", "Bearer "+tok)
	if doc := subscriptionDoc(t, w.next(t)); doc["subscriber"] == "urn:evil" {
		t.Error("the client chose its subscriber id")
	}
}

// TestAUTH41_READMEAuthorizerPayload: the README's Authorizer example.
// Its payload goes with its one subscribe grant, as a token's would: a
// subscription carries it when the grant selects the subscription's own
// matcher taken as a topic, and a subscription to a public topic or to *
// carries none (spec §Authorization: Payloads).
func TestAUTH41_READMEAuthorizerPayload(t *testing.T) {
	t.Parallel()
	authorize := func(r *http.Request) (*mercure.Access, error) {
		c, err := r.Cookie(sessionCookieName) // the app's own session lookup
		if err != nil {
			return nil, nil
		}
		user := struct{ Name string }{c.Value}
		// As in the README:
		return &mercure.Access{
			Subject:   user.Name,
			Subscribe: []mercure.Match{{Pattern: "https://example.com/users/" + user.Name + "/{*}?", Type: mercure.MatchURLPattern}},
			Payload:   map[string]string{"user": user.Name},
		}, nil
	}
	th := startMountedHub(t, mercure.WithAuthorizer(authorize, time.Minute), mercure.WithSubscriptions())
	const alice = `{"user":"alice"}`
	want := map[string]string{ // by match: the payload of its subscription
		"https://example.com/users/alice/inbox":  alice,
		"https://example.com/users/alice/{*}?":   alice, // the grant itself
		"https://example.com/users/alice/:box":   alice,
		"https://example.com/users/alice/inbox/": alice,
		"https://example.com/users/alice":        "", // the grant wants the slash
		"https://example.com/users/bob/inbox":    "",
		"https://example.com/books/1":            "", // public updates only
		"*":                                      "",
	}
	for match := range want {
		q := "match=" + url.QueryEscape(match)
		if strings.ContainsAny(match, "{:") {
			q = "match_urlpattern=" + url.QueryEscape(match)
		}
		th.subscribe(q, cookie("alice")...)
	}
	subs, err := th.Subscriptions(context.Background())
	if err != nil || len(subs) != len(want) {
		t.Fatalf("Subscriptions: %d, %v; want %d", len(subs), err, len(want))
	}
	for _, s := range subs {
		if got := string(s.Payload); got != want[s.Match] {
			t.Errorf("%s %s: payload %q, want %q", s.MatchType, s.Match, got, want[s.Match])
		}
	}
}

// ACT-10: subscription events are private: a stream without a grant on
// their topics never sees them, even with match=*.
func TestACT10_EventsArePrivate(t *testing.T) {
	t.Parallel()
	th := startAuthHub(t, mercure.WithSubscriptions(), mercure.WithAnonymousSubscribers())
	s := th.subscribe("match=*")
	th.subscribe("match=x")
	marker := publishMarker(t, th, "https://example.com/marker")
	if ev := s.next(t); ev.Data != marker {
		t.Fatalf("got %+v, want only the marker", ev)
	}
}

// The Go API lists the active subscriptions; the metadata advertises the
// feature (DIS-7); ending streams at shutdown publishes their end events.
func TestACT_GoAPIAndShutdown(t *testing.T) {
	t.Parallel()
	st := newMemoryStore(t, 100)
	th := startMountedHub(t, withAuthIssuer(t), mercure.WithAnonymousSubscribers(),
		mercure.WithSubscriptions(), mercure.WithStore(st))
	h := th.Hub
	th.subscribe("match=a&match_urlpattern=" + url.QueryEscape("/books/:id"))
	subs, err := h.Subscriptions(context.Background())
	if err != nil || len(subs) != 2 {
		t.Fatalf("Subscriptions: %v, %v", subs, err)
	}
	if subs[0].Subscriber != subs[1].Subscriber || !subs[0].Active {
		t.Errorf("subscriptions %+v", subs)
	}
	_, body, _ := do(t, mustRequest(t, http.MethodGet, th.srv.URL+h.MetadataPath(), ""))
	if !strings.Contains(body, `"mercure_subscriptions":true`) {
		t.Errorf("metadata %s", body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := st.Replay(context.Background(), store.Earliest)
	ended := 0
	for e := range b.Events {
		if strings.Contains(e.Data, `"active":false`) {
			ended++
		}
	}
	if ended != 2 {
		t.Fatalf("%d end events stored at shutdown, want 2", ended)
	}
	if subs, _ := h.Subscriptions(context.Background()); len(subs) != 0 {
		t.Fatalf("still listed after shutdown: %v", subs)
	}
}

// ACT-12 to ACT-19: the web API, authorized as subscribe on its own path.
func TestACT_WebAPI(t *testing.T) {
	t.Parallel()
	th := startMountedHub(t, withAuthIssuer(t), mercure.WithAnonymousSubscribers(), mercure.WithSubscriptions())
	h := th.Hub
	const match = "https://example.com/books/:id"
	th.subscribe("match_urlpattern=" + url.QueryEscape(match))
	subs, _ := h.Subscriptions(context.Background())
	if len(subs) != 1 {
		t.Fatalf("subscriptions %v", subs)
	}
	one := subs[0]

	all := subToken(t, detail("subscribe", exactTopic("*")))
	api := subToken(t, detail("subscribe", patternTopic("/.well-known/mercure/subscriptions*")))
	onlyOne := subToken(t, detail("subscribe", exactTopic(one.ID)))
	get := func(path, tok string) (int, string, http.Header) {
		t.Helper()
		req := mustRequest(t, http.MethodGet, th.srv.URL+path, "")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		return do(t, req)
	}
	base := "/.well-known/mercure/subscriptions"
	matcherPath := base + "/urlpattern/https%3A%2F%2Fexample.com%2Fbooks%2F%3Aid"

	// The collection.
	status, body, hdr := get(base, api)
	if status != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("collection: %d %s", status, body)
	}
	var coll struct {
		ID            string                 `json:"id"`
		Type          string                 `json:"type"`
		Subscriptions []mercure.Subscription `json:"subscriptions"`
	}
	if err := json.Unmarshal([]byte(body), &coll); err != nil || coll.ID != base || coll.Type != "subscriptions" || len(coll.Subscriptions) != 1 || !sameSub(coll.Subscriptions[0], one) {
		t.Fatalf("collection %s (%v)", body, err)
	}
	link := hdr.Get("Link")
	for _, want := range []string{"<" + testHubURL + `>; rel="mercure"`, `last-event-id="`, `type="mercure"`, `content-type="application/json"`} {
		if !strings.Contains(link, want) {
			t.Errorf("Link %q lacks %q (ACT-17)", link, want)
		}
	}
	if hdr.Get("ETag") == "" || hdr.Get("Cache-Control") != "must-revalidate" {
		t.Errorf("ETag %q, Cache-Control %q (ACT-19)", hdr.Get("ETag"), hdr.Get("Cache-Control"))
	}

	// The collection of one matcher, and one subscription, also when the
	// client encodes differently (lowercase hex, a raw ':'): ACT-13.
	if status, body, _ := get(matcherPath, all); status != 200 || !strings.Contains(body, `"id":"`+matcherPath+`"`) {
		t.Fatalf("matcher collection: %d %s", status, body)
	}
	for _, p := range []string{one.ID, strings.ReplaceAll(one.ID, "%3A", ":"), strings.ReplaceAll(one.ID, "%2F", "%2f")} {
		status, body, _ := get(p, onlyOne)
		var got mercure.Subscription
		if status != 200 || json.Unmarshal([]byte(body), &got) != nil || !sameSub(got, one) {
			t.Fatalf("GET %s: %d %s", p, status, body)
		}
	}

	// Authorization and errors.
	if status, _, hdr := get(base, ""); status != 401 || bareChallenge(hdr.Get("WWW-Authenticate")) != challengeNone {
		t.Errorf("no token: %d %q", status, hdr.Get("WWW-Authenticate"))
	}
	if status, _, hdr := get(base, onlyOne); status != 403 || bareChallenge(hdr.Get("WWW-Authenticate")) != challengeScope {
		t.Errorf("grant on one subscription only, collection: %d %q", status, hdr.Get("WWW-Authenticate"))
	}
	if status, _, _ := get(matcherPath+"/urn%3Auuid%3Aunknown", all); status != 404 {
		t.Errorf("unknown subscription: %d", status)
	}
}

func sameSub(a, b mercure.Subscription) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Dot segments in the API path are not resources: the grant check resolves
// them away, so serving them would check one path and serve another.
func TestACT13_DotSegments(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL, withAuthIssuer(t), mercure.WithAnonymousSubscribers(), mercure.WithSubscriptions())
	if err != nil {
		t.Fatal(err)
	}
	th := startHubServer(t, h, h) // no ServeMux: it would clean the paths itself
	th.subscribe("match=.")
	tok := subToken(t, detail("subscribe", exactTopic("*")))
	for _, p := range []string{"/exact/%2E", "/exact/%2E%2E", "/exact/%2e/x"} {
		req := mustRequest(t, http.MethodGet, th.srv.URL+"/.well-known/mercure/subscriptions"+p, "")
		req.Header.Set("Authorization", "Bearer "+tok)
		if status, body, _ := do(t, req); status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", p, status, body)
		}
	}
}

// heldStore holds the appends of subscription events (type mercure) until
// released or until their context ends, like a store that stopped
// answering.
type heldStore struct {
	*memstore.Store
	release   chan struct{}
	waiting   atomic.Int32
	startOnly bool // hold start events only, let end events through
}

func (s *heldStore) Append(ctx context.Context, e *store.Event) error {
	if e.Type == "mercure" && (!s.startOnly || strings.Contains(e.Data, `"active":true`)) {
		s.waiting.Add(1)
		defer s.waiting.Add(-1)
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Append(ctx, e)
}

// ACT-2: a stream's subscription events are appended after its headers
// and replay, so a store that is slow, or gone, never delays its first
// byte; and Shutdown does not wait for a store that does not answer past
// its own deadline, however many subscriptions the streams hold.
func TestACT2_SubscriptionEventsNeverHoldTheStream(t *testing.T) {
	t.Parallel()
	st := &heldStore{Store: newMemoryStore(t, 100), release: make(chan struct{})}
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(), mercure.WithSubscriptions(), mercure.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	th := startHubServer(t, h, h)

	q := ""
	for i := range 10 {
		q += fmt.Sprintf("&match=urn:t:%d", i)
	}
	// Headers (and a replayed event) arrive while the start events wait.
	goPublish(t, th, mercure.Update{Topics: []string{"urn:t:0"}, ID: "before", Data: "before"})
	s := th.subscribe(q[1:], "Last-Event-ID", store.Earliest)
	if ev := s.next(t); ev.ID != "before" {
		t.Fatalf("replayed %+v", ev)
	}
	// The appends come after, and wait.
	testwait.For(t, "the start events", func() bool { return st.waiting.Load() == 1 })
	goPublish(t, th, mercure.Update{Topics: []string{"urn:t:1"}, Data: "live"})
	expectData(t, s, "live")

	// A second stream's announcements wait too; Shutdown gives up on
	// them with its context, not after 5 s per subscription.
	th.subscribe(q[1:])
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Shutdown waited for the store past its deadline")
	}
	testwait.For(t, "the announcements to give up", func() bool { return st.waiting.Load() == 0 })
}

// ACT-2: a subscription's end event never precedes its start event, even
// when the stream ends while its start is still being announced.
func TestACT2_EndFollowsStart(t *testing.T) {
	t.Parallel()
	st := &heldStore{Store: newMemoryStore(t, 100), release: make(chan struct{}), startOnly: true}
	h, err := mercure.New(testHubURL, mercure.WithSubscriptions(), mercure.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	th := startHubServer(t, h, h)
	s := th.subscribe("match=urn:a")
	testwait.For(t, "the start event", func() bool { return st.waiting.Load() == 1 })
	s.close()
	// The stream's end is under way once the hub lists its subscription
	// no more; its end event must wait for the start.
	testwait.For(t, "the stream to end", func() bool {
		subs, err := h.Subscriptions(context.Background())
		return err == nil && len(subs) == 0
	})
	close(st.release)
	var got []string
	testwait.For(t, "both events", func() bool {
		b, err := st.Replay(context.Background(), store.Earliest)
		got = got[:0]
		for e := range b.Events {
			got = append(got, e.Data)
		}
		return err == nil && len(got) == 2
	})
	if !strings.Contains(got[0], `"active":true`) || !strings.Contains(got[1], `"active":false`) {
		t.Fatalf("events in this order: %q", got)
	}
}
