package mercure_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
)

// FuzzPublishForm feeds arbitrary bodies to the publish endpoint: the hub
// answers 200, 400 or 413, never fails or panics, and dispatches an update
// exactly when it answers 200 (a refused publish changes nothing).
func FuzzPublishForm(f *testing.F) {
	for _, seed := range []string{
		"topic=https%3A%2F%2Fexample.com%2Fbooks%2F1&data=x",
		"topic=a&topic=b&private&id=x&type=t&retry=10",
		"topic=%2F.well-known%2F%256Dercure%2Fx", "topic=*", "topic=a&retry=1e3", "topic=a&id=%23x",
		"topic=%E2%80%8B", "topic=a&data=%FF", "topic=a&type=mercure", "&&=&%&%zz=%4", "topic=" + strings.Repeat("a", 3000),
	} {
		f.Add(seed)
	}
	h, err := mercure.New(testHubURL, mercure.WithInsecurePublishing(), withHistory(f, 1))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Shutdown(context.Background()) })
	f.Fuzz(func(t *testing.T, body string) {
		// The latest recorded id moves when, and only when, the hub
		// records an update: it is set as the store passes the update on.
		before := h.LastEventID()
		req := httptest.NewRequest(http.MethodPost, h.Path(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch latest := h.LastEventID(); rec.Code {
		case http.StatusOK:
			if rec.Body.Len() == 0 || latest != rec.Body.String() {
				t.Fatalf("200 with id %q, yet the latest recorded is %q", rec.Body.String(), latest)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if latest != before {
				t.Fatalf("%d, yet %q was recorded", rec.Code, latest)
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
	})
}

// FuzzSubscribeQuery feeds arbitrary query strings to the subscribe
// endpoint: the hub answers 200 or 400 (or 429 for too many unanchored
// patterns), never fails or panics. Accepted requests are cut short by
// their context.
func FuzzSubscribeQuery(f *testing.F) {
	for _, seed := range []string{
		"match=a", "match_urlpattern=%2Fbooks%2F%3Aid", "match=*&last_event_id=earliest", "Match=a", "match_regex=a",
		"match_urlpattern=%23*0", "match_urlpattern=(%3F%3Da)", "match=%FF", "match=&match", "match_urlpattern=*%3A%2F%2F*",
	} {
		f.Add(seed)
	}
	h, err := mercure.New(testHubURL)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Shutdown(context.Background()) })
	f.Fuzz(func(t *testing.T, query string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // an accepted stream ends at once
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, h.Path(), nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, query, rec.Body.String())
		}
	})
}
