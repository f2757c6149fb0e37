package natsstore_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

const (
	hubURL = "https://example.com/.well-known/mercure"
	topic  = "https://example.com/books/1"
)

// instance is one app instance: a hub on its own connection and store.
type instance struct {
	hub   *mercure.Hub
	store *natsstore.Store
	nc    *nats.Conn
	srv   *httptest.Server
}

func newInstance(t *testing.T, url, name string, opts ...natsstore.Option) *instance {
	t.Helper()
	nc := dial(t, url)
	st := openOn(t, nc, name, opts...)
	h, err := mercure.New(hubURL, mercure.WithStore(st),
		mercure.WithAnonymousSubscribers(), mercure.WithInsecurePublishing(), mercure.WithSubscriptions(),
		mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{hub: h, store: st, nc: nc, srv: httptest.NewServer(h)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		in.srv.Close()
		st.Close()
	})
	return in
}

// subscribe opens a stream on in matching topic.
func subscribe(t *testing.T, in *instance) *storetest.Stream {
	t.Helper()
	return storetest.Subscribe(t, in.srv, "/.well-known/mercure", "match="+url.QueryEscape(topic), "")
}

// subscribers returns the subscriber ids that in's hub lists as
// subscribed to topic, or nil when listing fails.
func subscribers(in *instance) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	subs, err := in.hub.Subscriptions(ctx)
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range subs {
		if s.Match == topic && s.Active {
			ids = append(ids, s.Subscriber)
		}
	}
	slices.Sort(ids)
	return ids
}

// own returns the subscriber ids that in's hub lists.
func own(t *testing.T, in *instance) []string {
	t.Helper()
	subs, err := in.hub.Subscriptions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range subs {
		ids = append(ids, s.Subscriber)
	}
	return ids
}

func waitSubscribers(t *testing.T, in *instance, what string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !storetest.Within(storetest.Deadline, func() bool { return slices.Equal(subscribers(in), want) }) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		subs, err := in.hub.Subscriptions(ctx)
		t.Fatalf("timed out after %v waiting for %s: want %q, the hub lists %+v (error %v)",
			storetest.Deadline, what, want, subs, err)
	}
}

// active returns the change of the subscription id: added (on) with a
// document of the hub's, or removed.
func active(id string, on bool) store.Subscription {
	s := store.Subscription{ID: id, Active: on}
	if on {
		s.JSON, _ = json.Marshal(mercure.Subscription{ID: id, Type: "subscription", Active: on})
	}
	return s
}

func ids(s *natsstore.Store) []string {
	ids, _ := storetest.SubscriptionIDs(context.Background(), s)
	return ids
}

// TestSharedSubscriptions checks that the subscriptions API of any
// instance lists the subscribers of all (ACT-12 across instances): they
// appear and disappear with their streams, they are there after the
// server restarts, and they expire when their instance dies without a
// word. (A server restarted without its data rewinds the history: the
// hubs end every stream, and list none; TestSharedSubscriptionsRewritten
// AfterLoss checks that the stores write theirs again.)
func TestSharedSubscriptions(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	const ttl = time.Second
	opts := []natsstore.Option{natsstore.WithSubscriptionTTL(ttl), natsstore.WithTimeout(time.Second)}
	a := newInstance(t, srv.URL, "mercure", opts...)
	b := newInstance(t, srv.URL, "mercure", opts...)

	onA := subscribe(t, a)
	subA := own(t, a)
	if len(subA) != 1 {
		t.Fatalf("instance A lists %q right after one subscription", subA)
	}
	waitSubscribers(t, b, "B to list A's subscriber", subA[0])

	subscribe(t, b)
	// B's own subscriber is listed at once (ACT-17). A's is listed too,
	// unless a loaded machine delayed A's refresh past the short TTL:
	// wait for both.
	listed := subscribers(b)
	ownB := slices.DeleteFunc(slices.Clone(listed), func(id string) bool { return id == subA[0] })
	if len(ownB) != 1 {
		t.Fatalf("instance B lists %q right after its own subscription", listed)
	}
	both := []string{subA[0], ownB[0]}
	waitSubscribers(t, b, "B to list both", both...)
	waitSubscribers(t, a, "A to list both", both...)

	onA.Close()
	subB := ownB
	waitSubscribers(t, b, "B to drop A's ended subscriber", subB...)
	waitSubscribers(t, a, "A to drop its ended subscriber", subB...)

	// The server is killed and restarted: each store writes its
	// subscriptions again, under a name of its own: they are listed
	// once. (First, both hubs have the three subscription events, so
	// that none is appended around the restart.)
	storetest.WaitFor(t, "the subscription events", func() bool {
		return a.hub.Metrics().Dispatched == 3 && b.hub.Metrics().Dispatched == 3
	})
	srv.Kill()
	srv.Restart(t)
	waitSubscribers(t, a, "A to list B's subscriber after the restart", subB...)
	waitSubscribers(t, b, "B to list its subscriber after the restart", subB...)

	// Instance B dies: its connection is gone, without Close, its stream
	// still open. A stops listing its subscriber once the TTL has passed.
	b.nc.Close()
	waitSubscribers(t, a, "A to forget the dead instance's subscriber")
}

// TestSharedSubscriptionsWithdrawn: a store that closes withdraws its
// subscriptions at once, without waiting for them to expire.
func TestSharedSubscriptionsWithdrawn(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	a := newInstance(t, url, name, natsstore.WithSubscriptionTTL(time.Minute))
	b := newInstance(t, url, name)
	subscribe(t, a)
	waitSubscribers(t, b, "B to list A's subscriber", own(t, a)...)
	if err := a.store.Close(); err != nil {
		t.Fatal(err)
	}
	waitSubscribers(t, b, "B to drop the closed instance's subscriber")
	if _, err := a.store.Subscriptions(context.Background()); err != natsstore.ErrClosed {
		t.Fatalf("Subscriptions after Close: %v, want ErrClosed", err)
	}
	if err := a.store.UpdateSubscriptions(context.Background(), []store.Subscription{active("x", true)}); err != natsstore.ErrClosed {
		t.Fatalf("UpdateSubscriptions after Close: %v, want ErrClosed", err)
	}
}

// TestSharedSubscriptionsRewrittenAfterLoss: the server restarts
// without its data, buckets included, and the first write after it adds
// a subscription: the store makes the buckets again, and writes the
// others too. The TTL is long, so that no refresh runs meanwhile.
func TestSharedSubscriptionsRewrittenAfterLoss(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ncA := dial(t, srv.URL)
	a := openOn(t, ncA, "m", natsstore.WithSubscriptionTTL(time.Minute))
	b := openOn(t, dial(t, srv.URL), "m", natsstore.WithSubscriptionTTL(time.Minute))
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := context.Background()
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("old", true)}); err != nil {
		t.Fatal(err)
	}
	if got := ids(b); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("B lists %q once A's update returned, want [old]", got)
	}
	srv.Kill()
	srv.Wipe(t)
	srv.Restart(t)
	storetest.WaitFor(t, "A's connection to be back", func() bool { return ncA.FlushTimeout(time.Second) == nil })
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("new", true)}); err != nil {
		t.Fatalf("the first write after the restart: %v", err)
	}
	storetest.WaitFor(t, "B to list both", func() bool { return slices.Equal(ids(b), []string{"new", "old"}) })
}

// TestUpdateSubscriptionsFailsFast: while the server is down, the update
// returns the write's error instead of waiting for its context; the
// change is kept and written once the server is back.
func TestUpdateSubscriptionsFailsFast(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	a := openOn(t, dial(t, srv.URL), "m", natsstore.WithTimeout(time.Second))
	b := openOn(t, dial(t, srv.URL), "m")
	t.Cleanup(func() { a.Close(); b.Close() })
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // past storetest.Deadline
	defer cancel()
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("s", true)}); err == nil {
		t.Fatal("UpdateSubscriptions succeeded with the server down")
	} else if ctx.Err() != nil {
		t.Fatalf("UpdateSubscriptions waited for its context: %v", err)
	}
	srv.Restart(t)
	storetest.WaitFor(t, "B to list the kept change", func() bool { return slices.Equal(ids(b), []string{"s"}) })
}

// TestSharedSubscriptionsOfAStoreTakenForDead: a store's key in the
// bucket of live stores vanished while it lives (its refresh came too
// late on a loaded machine, or an operator purged it), and another
// store, listing, purged its subscriptions as a dead store's. The store
// finds its key gone at its next refresh, and writes them again.
func TestSharedSubscriptionsOfAStoreTakenForDead(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	a := openOn(t, dial(t, url), name, natsstore.WithSubscriptionTTL(1500*time.Millisecond))
	b := openOn(t, dial(t, url), name)
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := context.Background()
	if err := a.UpdateSubscriptions(ctx, []store.Subscription{active("x", true), active("y", true)}); err != nil {
		t.Fatal(err)
	}
	if got := ids(b); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("B lists %q, want A's x and y", got)
	}
	js, err := jetstream.New(dial(t, url))
	if err != nil {
		t.Fatal(err)
	}
	hubs, err := js.KeyValue(ctx, name+"_hubs")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := hubs.Keys(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("live stores %q (%v), want A's and B's", keys, err)
	}
	for _, k := range keys {
		if err := hubs.Purge(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// B, listing, finds A dead and purges its subscriptions (unless A
	// refreshed its key first); then A's refresh finds its key gone, and
	// writes them again.
	if got := ids(b); len(got) != 0 {
		t.Logf("B still lists %q: A refreshed its key meanwhile", got)
	}
	storetest.WaitFor(t, "B to list A's subscriptions again", func() bool { return slices.Equal(ids(b), []string{"x", "y"}) })
}

// TestSharedSubscriptionsWithTTLsOfTheirOwn: stores on one stream with
// different WithSubscriptionTTL each keep theirs. Each store's key
// expires after its own TTL: a store opened with a short one does not
// make the keys of the others expire with it.
func TestSharedSubscriptionsWithTTLsOfTheirOwn(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	long := openOn(t, dial(t, url), name, natsstore.WithSubscriptionTTL(time.Minute))
	t.Cleanup(func() { long.Close() })
	ctx := context.Background()
	if err := long.UpdateSubscriptions(ctx, []store.Subscription{active("kept", true)}); err != nil {
		t.Fatal(err)
	}
	short := openOn(t, dial(t, url), name, natsstore.WithSubscriptionTTL(time.Second))
	t.Cleanup(func() { short.Close() })
	// The short store refreshes its key every third of a second: once it
	// has five times, more than its TTL has passed since it opened.
	js, err := jetstream.New(dial(t, url))
	if err != nil {
		t.Fatal(err)
	}
	hubs, err := js.KeyValue(ctx, name+"_hubs")
	if err != nil {
		t.Fatal(err)
	}
	w, err := hubs.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := map[string]int{}
	for refreshed := false; !refreshed; {
		select {
		case e := <-w.Updates():
			if e != nil && e.Operation() == jetstream.KeyValuePut {
				writes[e.Key()]++
				refreshed = writes[e.Key()] >= 5
			}
		case <-time.After(storetest.Deadline):
			t.Fatalf("the short store's key was not refreshed five times: %v", writes)
		}
	}
	if got := ids(short); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("the short store lists %q, want the long one's kept", got)
	}
}
