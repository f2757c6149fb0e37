package mercure_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mercurekit/mercure"
)

// DIS-2, DIS-3, DIS-4: the hub's discovery link, with quoted attributes.
func TestDIS_Link(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())

	hdr := http.Header{}
	if err := h.Link(hdr, mercure.Link{}); err != nil {
		t.Fatal(err)
	}
	if got, want := hdr.Get("Link"), `<https://example.com/.well-known/mercure>; rel="mercure"`; got != want {
		t.Fatalf("Link %q, want %q", got, want)
	}

	hdr = http.Header{}
	if err := h.Link(hdr, mercure.Link{LastEventID: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := hdr.Get("Link"), `<https://example.com/.well-known/mercure>; rel="mercure"; last-event-id="earliest"`; got != want {
		t.Fatalf("before any update: Link %q, want %q", got, want)
	}

	// A publisher's id may hold quotes and backslashes (DIS-4).
	if _, err := h.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/books/1"}, ID: `a"b\c`}); err != nil {
		t.Fatal(err)
	}
	hdr = http.Header{}
	err = h.Link(hdr, mercure.Link{LastEventID: true, Type: "book-updated", ContentType: "application/merge-patch+json"})
	if err != nil {
		t.Fatal(err)
	}
	want := `<https://example.com/.well-known/mercure>; rel="mercure"; last-event-id="a\"b\\c"; type="book-updated"; content-type="application/merge-patch+json"`
	if got := hdr.Get("Link"); got != want {
		t.Fatalf("Link\n %q\nwant\n %q", got, want)
	}
}

// DIS-3: an application's resource may not advertise the type mercure,
// nor a type the publish endpoint would refuse; nothing is written then.
func TestDIS3_LinkTypeRules(t *testing.T) {
	t.Parallel()
	h, err := mercure.New(testHubURL)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	for _, typ := range []string{"mercure", "a\nb", "x\u200by"} {
		hdr := http.Header{}
		if err := h.Link(hdr, mercure.Link{Type: typ, Topic: "https://example.com/books/1"}); !errors.Is(err, mercure.ErrInvalidOption) {
			t.Errorf("type %q: %v, want ErrInvalidOption", typ, err)
		}
		if len(hdr) != 0 {
			t.Errorf("type %q: header written: %v", typ, hdr)
		}
	}
	if err := h.Link(http.Header{}, mercure.Link{ContentType: "a\rb"}); !errors.Is(err, mercure.ErrInvalidOption) {
		t.Errorf("content-type with CR: %v, want ErrInvalidOption", err)
	}
}

// DIS-9: the rel="self" link names the canonical topic and stays one link.
func TestDIS9_SelfLink(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"https://example.com/books/1":     `<https://example.com/books/1>; rel="self"`,
		"https://example.com/a b>c":       `<https://example.com/a%20b%3Ec>; rel="self"`,
		"https://example.com/café":        `<https://example.com/caf%C3%A9>; rel="self"`,
		`https://example.com/"x"`:         `<https://example.com/%22x%22>; rel="self"`,
		"urn:isbn:9780441013593":          `<urn:isbn:9780441013593>; rel="self"`,
		"https://example.com/q?a=1&b=%20": `<https://example.com/q?a=1&b=%20>; rel="self"`,
	}
	h, err := mercure.New(testHubURL)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	for topic, want := range cases {
		hdr := http.Header{}
		if err := h.Link(hdr, mercure.Link{Topic: topic}); err != nil {
			t.Fatal(err)
		}
		if got := hdr.Values("Link"); len(got) != 2 || got[1] != want {
			t.Errorf("Link{Topic: %q}: %q, want the hub's link, then %q", topic, got, want)
		}
	}
}

// Mount registers the hub and its metadata document in one call, under
// any path prefix.
func TestDIS5_Mount(t *testing.T) {
	t.Parallel()
	for _, hubURL := range []string{testHubURL, "https://example.com/app/hub"} {
		h, err := mercure.New(hubURL, mercure.WithInsecurePublishing(),
			withAuthIssuer(t), mercure.WithAnonymousSubscribers())
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		h.Mount(mux)
		srv := httptest.NewServer(mux)
		th := &testHub{Hub: h, srv: srv, t: t}
		s := th.subscribe("match=x")
		id := th.mustPost("topic=x")
		if ev := s.next(t); ev.ID != id {
			t.Fatalf("%s: got %+v", hubURL, ev)
		}
		res, err := http.Get(srv.URL + h.MetadataPath())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: metadata %d %s", hubURL, res.StatusCode, res.Header.Get("Content-Type"))
		}
		s.close()
		h.Shutdown(context.Background())
		srv.Close()
	}
}
