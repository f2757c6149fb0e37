package mercure_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// The seams between a hub and its store: the live feed's status, a store
// that refuses an update, the latest id of a durable store, and the
// subscriptions shared through the store.

// feedStore captures the hub's Listener, so that the test plays a store
// on the network: it reports the feed's status, holds the events appended
// while the feed is down and delivers them once it is back.
type feedStore struct {
	*memstore.Store
	mu   sync.Mutex
	l    store.Listener
	down bool
	held []*store.Event
}

func (f *feedStore) Listen(l store.Listener) func() {
	f.mu.Lock()
	f.l = l
	f.mu.Unlock()
	return f.Store.Listen(store.Listener{Event: func(e *store.Event) {
		f.mu.Lock()
		if f.down {
			f.held = append(f.held, e)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		l.Event(e)
	}})
}

// status reports err to the hub; with err nil it then delivers the held
// events, as a store does once its feed is back (see store.Listener).
func (f *feedStore) status(err error) {
	f.mu.Lock()
	l := f.l
	f.down = err != nil
	held := f.held
	if err == nil {
		f.held = nil
	}
	f.mu.Unlock()
	l.Status(err)
	if err == nil {
		for _, e := range held {
			l.Event(e)
		}
	}
}

// logLines counts the lines of log holding every one of parts.
func logLines(log string, parts ...string) int {
	n := 0
	for line := range strings.Lines(log) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			n++
		}
	}
	return n
}

// The hub records the store's feed status in Stats().FeedError and logs
// each transition once: an error when the feed starts failing (not again
// while it keeps failing), an info line when it is back (not when it was
// not failing). Events passed to the listener reach subscribers, also
// those appended while the feed was down, once it is back.
func TestFeedStatus(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
	log := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, nil))
	st := &feedStore{Store: newMemoryStore(t, 10)}
	th := newTestHub(t, mercure.WithStore(st), mercure.WithLogger(log))
	s := th.subscribe("match=x")
	goPublish(t, th, mercure.Update{Topics: []string{"x"}, Data: "before"})
	expectData(t, s, "before")
	if err := th.Metrics().FeedError; err != nil {
		t.Fatalf("FeedError %v while the feed works", err)
	}

	const failing, back = "feed is failing", "feed is back"
	down, stillDown := errors.New("down"), errors.New("still down")
	st.status(down)
	if err := th.Metrics().FeedError; !errors.Is(err, down) {
		t.Fatalf("FeedError %v, want %v", err, down)
	}
	st.status(stillDown)
	if err := th.Metrics().FeedError; !errors.Is(err, stillDown) {
		t.Fatalf("FeedError %v, want the newest error %v", err, stillDown)
	}
	if n := logLines(logged(), "level=ERROR", failing); n != 1 {
		t.Fatalf("%d error lines for two failures in a row, want 1:\n%s", n, logged())
	}
	if n := logLines(logged(), back); n != 0 {
		t.Fatalf("feed reported back while failing:\n%s", logged())
	}
	// While the feed is down, the hub does not publish: an update
	// recorded now would reach no stream until the feed is back, and then
	// only if history still held it.
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: "refused"}); !errors.Is(err, mercure.ErrStore) {
		t.Fatalf("Publish while the feed is down: %v, want ErrStore", err)
	}
	if status, body, hdr := th.post("topic=x&data=refused"); status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(body, "feed") {
		t.Fatalf("POST while the feed is down: %d %q %q, want 503 saying why, with Retry-After", status, body, hdr.Get("Retry-After"))
	}

	st.status(nil)
	if err := th.Metrics().FeedError; err != nil {
		t.Fatalf("FeedError %v once the feed is back", err)
	}
	if n := logLines(logged(), "level=INFO", back); n != 1 {
		t.Fatalf("%d info lines for the recovery, want 1:\n%s", n, logged())
	}
	before := logged()
	st.status(nil)
	if got := logged(); got != before {
		t.Fatalf("a nil status while working logged:\n%s", strings.TrimPrefix(got, before))
	}
	if err := th.Metrics().FeedError; err != nil {
		t.Fatalf("FeedError %v", err)
	}
	goPublish(t, th, mercure.Update{Topics: []string{"x"}, Data: "after"})
	expectData(t, s, "after")

	// A new failure is a new transition: logged again.
	st.status(down)
	if n := logLines(logged(), "level=ERROR", failing); n != 2 {
		t.Fatalf("%d error lines after a second outage, want 2:\n%s", n, logged())
	}
	st.status(nil)
}

// failingStore refuses the updates whose data starts with "fail".
type failingStore struct {
	*memstore.Store
	err error
}

func (f failingStore) Append(ctx context.Context, e *store.Event) error {
	if strings.HasPrefix(e.Data, "fail") {
		return f.err
	}
	return f.Store.Append(ctx, e)
}

// An update the store did not record is an error wrapping both ErrStore
// and the store's own error; over HTTP it is a 503 problem document; and
// nothing is dispatched.
func TestPublishStoreFailure(t *testing.T) {
	t.Parallel()
	errDown := errors.New("store down")
	th := newTestHub(t, mercure.WithStore(failingStore{newMemoryStore(t, 10), errDown}))
	s := th.subscribe("match=x")

	id, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}, Data: "fail-go"})
	if !errors.Is(err, mercure.ErrStore) || !errors.Is(err, errDown) {
		t.Fatalf("Publish: %v, want an error wrapping ErrStore and the store's error", err)
	}
	if id != "" {
		t.Errorf("Publish returned the id %q of an update that was not stored", id)
	}

	status, body, hdr := th.post("topic=x&data=fail-http")
	if status != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503 (body %q)", status, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var problem struct {
		Status int `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &problem); err != nil || problem.Status != http.StatusServiceUnavailable {
		t.Errorf("problem document %q (%v)", body, err)
	}

	// Nothing was dispatched: the next event is the marker.
	expectData(t, s, publishMarker(t, th, "x"))
	select {
	case ev := <-s.events:
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
	if st := th.Metrics(); st.Dispatched != 1 {
		t.Errorf("Dispatched %d, want 1 (the marker)", st.Dispatched)
	}
}

// latestStore is a durable store: it knows the latest id from before the
// hub started. early, when not nil, is fed to the listener as soon as the
// hub listens, before New reads the latest id.
type latestStore struct {
	*memstore.Store
	latest string
	early  *store.Event
}

func (l latestStore) LatestID() string { return l.latest }

func (l latestStore) Listen(ls store.Listener) func() {
	cancel := l.Store.Listen(ls)
	if l.early != nil {
		ls.Event(l.early)
	}
	return cancel
}

// REC-13: a hub on a LatestStore starts from the store's latest id, not
// from earliest, unless it dispatched an event meanwhile; then each
// dispatched update moves it. A hub on a plain memory store starts at
// earliest.
func TestREC13_LatestStore(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithStore(latestStore{Store: newMemoryStore(t, 10), latest: "urn:example:last"}))
	if got := th.LastEventID(); got != "urn:example:last" {
		t.Fatalf("LastEventID %q after New, want the store's latest urn:example:last", got)
	}
	id, err := th.Publish(context.Background(), mercure.Update{Topics: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := th.LastEventID(); got != id {
		t.Fatalf("LastEventID %q after a publish, want %q", got, id)
	}

	t.Run("event dispatched meanwhile", func(t *testing.T) {
		early := &store.Event{Topics: []string{"x"}, ID: "urn:example:newer", Seq: 1, Time: time.Now()}
		th := newTestHub(t, mercure.WithStore(latestStore{newMemoryStore(t, 10), "urn:example:last", early}))
		if got := th.LastEventID(); got != "urn:example:newer" {
			t.Fatalf("LastEventID %q, want urn:example:newer, dispatched after the store's latest was recorded", got)
		}
	})

	t.Run("MemoryStore", func(t *testing.T) {
		th := newTestHub(t, mercure.WithStore(newMemoryStore(t, 10)))
		if got := th.LastEventID(); got != store.Earliest {
			t.Fatalf("LastEventID %q, want %q", got, store.Earliest)
		}
	})
}

// sharedSubsStore is a SubscriptionStore shared with another instance: it
// records every UpdateSubscriptions call, keeps this hub's active
// subscriptions, and lists them with those of the other instance, in no
// particular order.
type sharedSubsStore struct {
	*memstore.Store
	mu      sync.Mutex
	updates [][]mercure.Subscription
	active  map[string]mercure.Subscription
	others  []mercure.Subscription
	err     error
	// gate, when not nil, holds each UpdateSubscriptions call until it
	// receives from it: the store shares changes late.
	gate chan struct{}
	// misordered lists the subscriptions whose event came before the
	// listing changed.
	misordered []string
}

var (
	_ store.SubscriptionStore = (*sharedSubsStore)(nil)
	_ store.SubscriptionStore = emptySubsStore{}
	_ store.LatestStore       = latestStore{}
)

// UpdateSubscriptions records the documents decoded: the hub's
// subscriptions as its API lists them.
func (s *sharedSubsStore) UpdateSubscriptions(ctx context.Context, recs []store.Subscription) error {
	subs := make([]mercure.Subscription, len(recs))
	for i, rec := range recs {
		subs[i] = mercure.Subscription{ID: rec.ID, Active: rec.Active}
		if rec.Active {
			if err := json.Unmarshal(rec.JSON, &subs[i]); err != nil {
				return err
			}
		}
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, slices.Clone(subs))
	for _, sub := range subs {
		if sub.Active {
			s.active[sub.ID] = sub
		} else {
			delete(s.active, sub.ID)
		}
	}
	return nil
}

// Append checks that the store lists a subscription before its start
// event, and no longer lists it before its end event (ACT-17 across
// instances: no hub may dispatch an event its listing contradicts).
func (s *sharedSubsStore) Append(ctx context.Context, e *store.Event) error {
	if e.Type == "mercure" {
		var doc mercure.Subscription
		if err := json.Unmarshal([]byte(e.Data), &doc); err != nil {
			return err
		}
		s.mu.Lock()
		if _, listed := s.active[doc.ID]; listed != doc.Active {
			s.misordered = append(s.misordered, doc.ID)
		}
		s.mu.Unlock()
	}
	return s.Store.Append(ctx, e)
}

func (s *sharedSubsStore) Subscriptions(ctx context.Context) ([]store.Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	var recs []store.Subscription
	for _, sub := range append(slices.Clone(s.others), slices.Collect(maps.Values(s.active))...) {
		doc, err := json.Marshal(sub)
		if err != nil {
			return nil, err
		}
		recs = append(recs, store.Subscription{ID: sub.ID, Active: true, JSON: doc})
	}
	return recs, nil
}

func (s *sharedSubsStore) recorded() [][]mercure.Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.updates)
}

func (s *sharedSubsStore) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func subIDs(subs []mercure.Subscription) []string {
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.ID
	}
	return ids
}

// ACT-12 with a SubscriptionStore: the hub reports a stream's
// subscriptions to the store when it opens (active) and when it ends (not
// active), as the documents of its subscription events; Hub.Subscriptions
// and the web API list the store's subscriptions, those of every
// instance, sorted by id; and both fail when the store's listing fails.
func TestSubscriptionStore(t *testing.T) {
	t.Parallel()
	const base = "/.well-known/mercure/subscriptions"
	other := func(match string) mercure.Subscription {
		const sub = "urn:uuid:00000000-0000-4000-8000-000000000000"
		return mercure.Subscription{
			ID:   base + "/exact/" + match + "/" + strings.ReplaceAll(sub, ":", "%3A"),
			Type: "subscription", MatchType: "exact", Match: match, Subscriber: sub, Active: true,
		}
	}
	st := &sharedSubsStore{
		Store:  newMemoryStore(t, 100),
		active: make(map[string]mercure.Subscription),
		others: []mercure.Subscription{other("zz"), other("aa"), other("mm")},
	}
	th := startMountedHub(t, withAuthIssuer(t), mercure.WithAnonymousSubscribers(),
		mercure.WithSubscriptions(), mercure.WithStore(st))
	h := th.Hub

	s := th.subscribe("match=" + url.QueryEscape("https://example.com/books/1") + "&match_urlpattern=" + url.QueryEscape("/books/:id"))
	// The stream's subscriptions reach the store, then their events,
	// after its headers (ACT-2): the stream does not wait for them.
	testwait.For(t, "the stream's subscription events", func() bool {
		b, err := st.Replay(context.Background(), store.Earliest)
		n := 0
		for range b.Events {
			n++
		}
		return err == nil && n == 2
	})
	updates := st.recorded()
	if len(updates) != 1 || len(updates[0]) != 2 {
		t.Fatalf("UpdateSubscriptions calls %+v, want one with the stream's 2 subscriptions", updates)
	}
	started := updates[0]
	for _, sub := range started {
		if !sub.Active || sub.ID == "" || sub.MatchType == "" || sub.Match == "" || sub.Subscriber == "" || sub.Type != "subscription" {
			t.Errorf("incomplete or inactive subscription %+v", sub)
		}
	}
	if started[0].Subscriber != started[1].Subscriber {
		t.Errorf("one stream, two subscriber ids: %+v", started)
	}
	// They are the documents of the subscription events the hub stored.
	backlog, err := st.Replay(context.Background(), store.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	var docs []mercure.Subscription
	for e, err := range backlog.Events {
		if err != nil {
			t.Fatal(err)
		}
		var doc mercure.Subscription
		if e.Type != "mercure" || json.Unmarshal([]byte(e.Data), &doc) != nil || e.Topics[0] != doc.ID {
			t.Fatalf("unexpected event %+v", e)
		}
		docs = append(docs, doc)
	}
	if len(docs) != 2 || !sameSub(docs[0], started[0]) || !sameSub(docs[1], started[1]) {
		t.Fatalf("the store got\n %+v\nthe subscription events hold\n %+v", started, docs)
	}

	// Hub.Subscriptions: the store's list, sorted by id.
	want := append(slices.Clone(st.others), started...)
	slices.SortFunc(want, func(a, b mercure.Subscription) int { return strings.Compare(a.ID, b.ID) })
	subs, err := h.Subscriptions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(subIDs(subs), subIDs(want)) {
		t.Fatalf("Subscriptions ids\n %q\nwant, sorted\n %q", subIDs(subs), subIDs(want))
	}

	// The web API lists the same, and finds another instance's subscription.
	api := subToken(t, detail("subscribe", patternTopic(base+"*")))
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		req := mustRequest(t, http.MethodGet, th.srv.URL+path, "")
		req.Header.Set("Authorization", "Bearer "+api)
		return do(t, req)
	}
	status, body, _ := get(base)
	var coll struct {
		Subscriptions []mercure.Subscription `json:"subscriptions"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &coll) != nil {
		t.Fatalf("collection: %d %s", status, body)
	}
	if !slices.Equal(subIDs(coll.Subscriptions), subIDs(want)) {
		t.Fatalf("collection ids\n %q\nwant\n %q", subIDs(coll.Subscriptions), subIDs(want))
	}
	status, body, _ = get(other("mm").ID)
	var one mercure.Subscription
	if status != http.StatusOK || json.Unmarshal([]byte(body), &one) != nil || !sameSub(one, other("mm")) {
		t.Fatalf("another instance's subscription: %d %s", status, body)
	}

	// The stream ends: the store gets the same subscriptions' ids, not
	// active (their documents are the store's to forget).
	s.close()
	testwait.For(t, "the end of the stream to reach the store", func() bool { updates = st.recorded(); return len(updates) >= 2 })
	if len(updates) != 2 {
		t.Fatalf("UpdateSubscriptions calls %+v, want 2", updates)
	}
	ended := updates[1]
	if !slices.Equal(subIDs(ended), subIDs(started)) {
		t.Fatalf("ended ids %q, want those started %q", subIDs(ended), subIDs(started))
	}
	for _, sub := range ended {
		if sub.Active {
			t.Errorf("ended subscription %+v still active", sub)
		}
	}
	if subs, err := h.Subscriptions(context.Background()); err != nil || !slices.Equal(subIDs(subs), []string{other("aa").ID, other("mm").ID, other("zz").ID}) {
		t.Fatalf("after the stream ended: %q, %v", subIDs(subs), err)
	}

	// Each event came after the listing changed: start and end (ACT-17).
	testwait.For(t, "the end events to reach the store", func() bool { return endEvents(t, st.Store) >= 2 })
	st.mu.Lock()
	misordered := st.misordered
	st.mu.Unlock()
	if len(misordered) > 0 {
		t.Fatalf("events appended before the listing changed: %q", misordered)
	}

	// The store's listing fails: so do Hub.Subscriptions and the API.
	errDown := errors.New("store down")
	st.setErr(errDown)
	if subs, err := h.Subscriptions(context.Background()); !errors.Is(err, errDown) || !errors.Is(err, mercure.ErrStore) || subs != nil {
		t.Fatalf("Subscriptions: %v, %v, want ErrStore wrapping the store's error", subs, err)
	}
	status, body, hdr := get(base)
	if status != http.StatusServiceUnavailable || hdr.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("collection with a failing store: %d %q %s", status, hdr.Get("Content-Type"), body)
	}
}

// ACT-2 with a SubscriptionStore that shares changes late: the hub lists
// its own stream's subscriptions from the stream's first byte, before the
// store has them, and stops listing them when the stream ends, before the
// store has the end; the other instances' come from the store all along.
func TestSubscriptionStore_OwnListedAtOnce(t *testing.T) {
	t.Parallel()
	other := mercure.Subscription{
		ID:   "/.well-known/mercure/subscriptions/exact/x/urn%3Auuid%3A00000000-0000-4000-8000-000000000000",
		Type: "subscription", MatchType: "exact", Match: "x", Subscriber: "urn:uuid:00000000-0000-4000-8000-000000000000", Active: true,
	}
	st := &sharedSubsStore{
		Store:  newMemoryStore(t, 100),
		active: make(map[string]mercure.Subscription),
		others: []mercure.Subscription{other},
		gate:   make(chan struct{}),
	}
	th := startMountedHub(t, mercure.WithAnonymousSubscribers(), mercure.WithSubscriptions(), mercure.WithStore(st))
	h := th.Hub
	list := func() []string {
		t.Helper()
		subs, err := h.Subscriptions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return subIDs(subs)
	}
	storeHas := func(id string) bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		_, ok := st.active[id]
		return ok
	}

	s := th.subscribe("match=" + url.QueryEscape("https://example.com/books/1"))
	ids := list()
	if len(ids) != 2 || ids[0] == other.ID && ids[1] == other.ID {
		t.Fatalf("right after the stream opened, the hub lists %q, want its own subscription and the other instance's", ids)
	}
	mine := ids[0]
	if mine == other.ID {
		mine = ids[1]
	}
	if storeHas(mine) {
		t.Fatal("the store has the subscription before its gate opened")
	}
	st.gate <- struct{}{} // the start reaches the store
	testwait.For(t, "the store to have the start", func() bool { return storeHas(mine) })
	if got := list(); !slices.Equal(got, ids) {
		t.Fatalf("once shared, the hub lists %q, want %q (each once)", got, ids)
	}

	s.close()
	testwait.For(t, "the hub to stop listing the ended stream's subscription", func() bool {
		return slices.Equal(list(), []string{other.ID})
	})
	if !storeHas(mine) {
		t.Fatal("the store lost the subscription before its end was shared")
	}
	st.gate <- struct{}{} // the end reaches the store
	testwait.For(t, "the store to have the end", func() bool { return !storeHas(mine) })
	testwait.For(t, "the hub to forget the shared end", func() bool { return h.WithdrawingSubscriptions() == 0 })
	if got := list(); !slices.Equal(got, []string{other.ID}) {
		t.Fatalf("after the end was shared, the hub lists %q", got)
	}
}

type emptySubsStore struct{ *memstore.Store }

func (emptySubsStore) UpdateSubscriptions(context.Context, []store.Subscription) error {
	return nil
}
func (emptySubsStore) Subscriptions(context.Context) ([]store.Subscription, error) {
	return nil, nil // no subscription anywhere
}

// ACT-16: the collection's subscriptions member is an array, also when the
// store lists none as a nil slice.
func TestACT16_EmptyCollectionFromStore(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]mercure.Option{
		"MemoryStore":       nil,
		"SubscriptionStore": {mercure.WithStore(emptySubsStore{newMemoryStore(t, 10)})},
	} {
		t.Run(name, func(t *testing.T) {
			th := startMountedHub(t, append([]mercure.Option{withAuthIssuer(t), mercure.WithSubscriptions()}, opts...)...)
			req := mustRequest(t, http.MethodGet, th.srv.URL+"/.well-known/mercure/subscriptions", "")
			req.Header.Set("Authorization", "Bearer "+subToken(t, detail("subscribe", exactTopic("*"))))
			status, body, _ := do(t, req)
			if status != 200 || !strings.Contains(body, `"subscriptions":[]`) {
				t.Fatalf("%d %s, want an empty array", status, body)
			}
		})
	}
}

// endEvents counts the subscription end events in s.
func endEvents(t *testing.T, s *memstore.Store) int {
	t.Helper()
	b, err := s.Replay(context.Background(), store.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for e, err := range b.Events {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "mercure" && strings.Contains(e.Data, `"active":false`) {
			n++
		}
	}
	return n
}

// gap tells the hub that the feed skipped the held events, then feeds the
// events that follow, as a store does when retention dropped what its
// feed missed (see store.Listener.Gap).
func (f *feedStore) gap(next ...*store.Event) {
	f.mu.Lock()
	l := f.l
	f.down, f.held = false, nil
	f.mu.Unlock()
	l.Gap()
	for _, e := range next {
		l.Event(e)
	}
}

// A feed that skipped events ends every open stream before it passes the
// next event: the client resumes from its Last-Event-ID and gets what it
// missed from history, never an event from after the gap first.
func TestFeedGap(t *testing.T) {
	t.Parallel()
	st := &feedStore{Store: newMemoryStore(t, 10)}
	th := newTestHub(t, mercure.WithStore(st))
	s := th.subscribe("match=x")
	goPublish(t, th, mercure.Update{Topics: []string{"x"}, ID: "a"})
	if ev := s.next(t); ev.ID != "a" {
		t.Fatalf("first event %q", ev.ID)
	}
	st.mu.Lock()
	st.down = true // the feed misses b and c
	st.mu.Unlock()
	goPublish(t, th, mercure.Update{Topics: []string{"x"}, ID: "b"})
	goPublish(t, th, mercure.Update{Topics: []string{"x"}, ID: "c"})
	st.mu.Lock()
	after := st.held[1]
	st.mu.Unlock()
	st.gap(after) // b was dropped; c follows the gap

	select {
	case <-s.done:
	case <-time.After(testwait.Deadline):
		t.Fatal("the stream did not end after the gap")
	}
	if s.err != nil {
		t.Fatalf("the stream did not end cleanly: %v", s.err)
	}
	select {
	case ev := <-s.events:
		t.Fatalf("the stream sent %q after the gap", ev.ID)
	default:
	}
	if n := th.Metrics().Overflows; n != 0 {
		t.Fatalf("the gap counted as %d overflows", n)
	}
	resumed := th.subscribe("match=x", "Last-Event-ID", "a")
	for _, want := range []string{"b", "c"} {
		if ev := resumed.next(t); ev.ID != want {
			t.Fatalf("resumed stream sent %q, want %q", ev.ID, want)
		}
	}
}

// After a gap, a stream still writes what it had queued before it (those
// events may be gone from history already), then ends.
func TestFeedGapDrainsQueue(t *testing.T) {
	t.Parallel()
	st := &feedStore{Store: newMemoryStore(t, 2)}
	th := newTestHub(t, mercure.WithStore(st), mercure.WithLimits(mercure.Limits{WriteDelay: time.Second}))
	s := th.subscribe("match=x")
	goPublish(t, th, mercure.Update{Topics: []string{"x"}, ID: "a"})
	s.next(t)
	goPublish(t, th, mercure.Update{Topics: []string{"x"}, ID: "b"})
	goPublish(t, th, mercure.Update{Topics: []string{"x"}, ID: "c"}) // b and c wait for the write delay
	st.mu.Lock()
	st.down = true
	st.mu.Unlock()
	for _, id := range []string{"d", "e", "f"} { // d is dropped from history: the gap
		goPublish(t, th, mercure.Update{Topics: []string{"x"}, ID: id})
	}
	st.mu.Lock()
	held := st.held
	st.mu.Unlock()
	st.gap(held[1:]...)
	select {
	case <-s.done:
	case <-time.After(testwait.Deadline):
		t.Fatal("the stream did not end after the gap")
	}
	var got []string
	for len(s.events) > 0 {
		got = append(got, (<-s.events).ID)
	}
	if !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("the stream ended with %q, want the queued b and c, nothing from after the gap", got)
	}
}

// gapStore ends every replay with ErrHistoryGap after the retained events,
// as a store does when retention drops the events a replay has yet to
// yield.
type gapStore struct{ *memstore.Store }

func (g gapStore) Replay(ctx context.Context, id string) (store.Backlog, error) {
	b, err := g.Store.Replay(ctx, id)
	events := b.Events
	b.Events = func(yield func(*store.Event, error) bool) {
		for e, err := range events {
			if !yield(e, err) {
				return
			}
		}
		yield(nil, fmt.Errorf("gapStore: %w", store.ErrHistoryGap))
	}
	return b, err
}

// A replay that ends with ErrHistoryGap ends the stream after the events
// it yielded, so that the client resumes; the hub logs it as a gap, at
// Debug level (one client's affair), not as a failure of the store.
func TestReplayGap(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	th := newTestHub(t, mercure.WithStore(gapStore{newMemoryStore(t, 10)}), mercure.WithLogger(log))
	th.mustPost("topic=x&data=a")
	s := th.subscribe("match=x&last_event_id=earliest")
	expectData(t, s, "a")
	select {
	case <-s.done:
	case <-time.After(testwait.Deadline):
		t.Fatal("the stream did not end after the gap")
	}
	mu.Lock()
	logged := buf.String()
	mu.Unlock()
	if logLines(logged, "level=DEBUG", "history dropped events before the replay reached them") != 1 || logLines(logged, "reading history fails") != 0 {
		t.Fatalf("log after a replay gap:\n%s", logged)
	}
}
