package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
	"github.com/mercurekit/mercure/internal/testwait"
)

// An application serves a resource with the hub's own Link headers; the
// client subscribes from the advertised cursor and so misses the update
// published between the fetch and the subscription (DIS-3).
func TestDiscover_FromRealLinkHeaders(t *testing.T) {
	_, trust := newSigner(t) // a hub that validates tokens serves metadata
	th := startHub(t, trust, mercure.WithAnonymousSubscribers(), withHistory(t, 100))
	publish(t, th.Hub, mercure.Update{Topics: []string{"https://example.com/books/1"}, ID: "before"})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := th.Link(w.Header(), mercure.Link{Topic: "https://example.com/books/1", LastEventID: true, Type: "book", ContentType: "application/merge-patch+json"})
		if err != nil {
			t.Error(err)
		}
		w.Write([]byte(`{"@id":"/books/1"}`))
	}))
	defer app.Close()

	ctx := testContext(t, testwait.Deadline)
	d, err := fastClient().Discover(ctx, app.URL+"/books/1")
	if err != nil {
		t.Fatal(err)
	}
	wantHubs := []client.HubLink{{URL: testHubURL, LastEventID: "before", Type: "book", ContentType: "application/merge-patch+json"}}
	if !reflect.DeepEqual(d.Hubs, wantHubs) || d.Topic != "https://example.com/books/1" {
		t.Fatalf("got %+v, want hubs %+v and the topic https://example.com/books/1", d, wantHubs)
	}
	publish(t, th.Hub, mercure.Update{Topics: []string{"https://example.com/books/1"}, ID: "between"})
	_, sub := d.Subscription()
	// The advertised URL is the hub's public one; the test reaches it at the server's address.
	got := collect(t, fastClient().Subscribe(ctx, th.endpoint(), sub), func([]client.Event) bool { return true })
	if got[0].ID != "between" {
		t.Fatalf("first event %q, want the one published between fetch and subscription", got[0].ID)
	}

	// The metadata the hub serves describes it (DIS-5, DIS-6).
	mu, _ := client.MetadataURL(testHubURL)
	if want := "https://example.com" + th.MetadataPath(); mu != want {
		t.Fatalf("MetadataURL = %q, want %q", mu, want)
	}
	local := th.srv.URL + "/.well-known/oauth-protected-resource/.well-known/mercure"
	m, err := fastClient().Metadata(ctx, testHubURL, local)
	if err != nil || m.Resource != testHubURL {
		t.Fatalf("Metadata = %+v, %v", m, err)
	}
	if _, err := fastClient().Metadata(ctx, "https://other.example/hub", local); !errors.Is(err, client.ErrMetadataMismatch) {
		t.Fatalf("Metadata of another hub: %v", err)
	}
}

func TestParseLinks(t *testing.T) {
	base, _ := url.Parse("https://example.com/books/1")
	got := client.ParseLinks([]string{
		`<https://hub.example/.well-known/mercure>; rel="mercure"; last-event-id="a\"b\\c, d"; type=book, </self>; REL="Self Alternate"`,
		`<../hub2>;rel=mercure;rel=other;Content-Type="application/json", garbage, <x>; rel="next"`,
	}, base)
	want := []client.Link{
		{URL: "https://hub.example/.well-known/mercure", Rel: []string{"mercure"}, Params: map[string]string{"last-event-id": `a"b\c, d`, "type": "book"}},
		{URL: "https://example.com/self", Rel: []string{"self", "alternate"}, Params: map[string]string{}},
		{URL: "https://example.com/hub2", Rel: []string{"mercure"}, Params: map[string]string{"content-type": "application/json"}},
		{URL: "https://example.com/books/x", Rel: []string{"next"}, Params: map[string]string{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// The Link parser never panics and keeps its invariants on any input.
func FuzzParseLinks(f *testing.F) {
	for _, s := range []string{
		`<https://h/.well-known/mercure>; rel="mercure"; last-event-id="x"`,
		`<a>;rel=self, <b>; rel="mercure"; type="t\"", <`,
		`<>; ;; rel=; "`, `,,,<x>;rel="a b"`,
	} {
		f.Add(s)
	}
	base, _ := url.Parse("https://example.com/r")
	f.Fuzz(func(t *testing.T, s string) {
		for _, l := range client.ParseLinks([]string{s}, base) {
			for _, r := range l.Rel {
				if r == "" {
					t.Fatalf("empty rel in %+v", l)
				}
			}
			if _, err := url.Parse(l.URL); err != nil {
				t.Fatalf("unparsable target %q", l.URL)
			}
		}
		client.ParseChallenges([]string{s})
	})
}

// discovered returns the subscription that the resource at resourceURL,
// advertising the hub at hubURL, makes.
func discovered(t *testing.T, resourceURL, hubURL string) (string, client.Subscription) {
	t.Helper()
	u, err := url.Parse(resourceURL)
	if err != nil {
		t.Fatal(err)
	}
	res := &http.Response{Request: &http.Request{URL: u}, Header: http.Header{"Link": {"<" + hubURL + `>; rel="mercure"`}}}
	d, err := client.DiscoverResponse(res)
	if err != nil {
		t.Fatal(err)
	}
	return d.Subscription()
}

// A discovered hub is held to what a redirect is (issue 41): a resource
// on https cannot send the client to a hub on http, nor a resource send
// the client's token to a hub on another origin. Without a token, or on
// the resource's origin, the subscription works.
func TestDiscover_SubscriptionHoldsTheHubToTheResource(t *testing.T) {
	t.Parallel()
	hub := newOrigin(t, false)
	ctx := testContext(t, testwait.Deadline)
	withToken := &client.Client{Token: client.StaticToken(secretToken)}
	first := func(c *client.Client, hubURL string, sub client.Subscription) (client.Event, error) {
		for ev, err := range c.Subscribe(ctx, hubURL, sub) {
			return ev, err
		}
		return client.Event{}, context.Cause(ctx)
	}
	for _, c := range []struct {
		name     string
		resource string
		c        *client.Client
	}{
		{"https resource, http hub", "https://app.example/books/1", &client.Client{}},
		{"another origin, with a token", "http://app.example/books/1", withToken},
	} {
		hubURL, sub := discovered(t, c.resource, hub.url("/hub"))
		if _, err := first(c.c, hubURL, sub); !errors.Is(err, client.ErrUntrustedHub) {
			t.Errorf("%s: %v, want ErrUntrustedHub", c.name, err)
		}
	}
	if n := hub.requests(); n != 0 {
		t.Fatalf("the refused hub got %d requests", n)
	}
	hubURL, sub := discovered(t, "http://app.example/books/1", hub.url("/anonymous"))
	if ev, err := first(&client.Client{}, hubURL, sub); err != nil || ev.ID != "/anonymous" {
		t.Fatalf("another origin, no token: %+v, %v", ev, err)
	}
	hubURL, sub = discovered(t, hub.url("/books/1"), hub.url("/same"))
	if ev, err := first(withToken, hubURL, sub); err != nil || ev.ID != "/same" {
		t.Fatalf("the resource's origin, with a token: %+v, %v", ev, err)
	}
	if got := hub.received("/same"); len(got) != 1 || got[0] != "Bearer "+secretToken {
		t.Fatalf("the hub on the resource's origin got Authorization %q", got)
	}
	// A subscription of the application's own is not held back.
	if ev, err := first(withToken, hub.url("/own"), client.Subscription{Matchers: sub.Matchers}); err != nil || ev.ID != "/own" {
		t.Fatalf("an application's own subscription: %+v, %v", ev, err)
	}
}
