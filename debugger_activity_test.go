package mercure_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure"
)

// activityDoc is the debugger's activity document.
type activityDoc struct {
	Interval      int      `json:"interval_ms"`
	RefusedLabels []string `json:"refused_labels"`
	TokenLabels   []string `json:"token_failure_labels"`
	Samples       []struct {
		Seq        uint64   `json:"seq"`
		Time       int64    `json:"t"`
		Streams    int      `json:"streams"`
		Published  uint64   `json:"published"`
		Deliveries uint64   `json:"deliveries"`
		Overflows  uint64   `json:"overflows"`
		Replays    uint64   `json:"replays"`
		Refused    []uint64 `json:"refused"`
		Tokens     []uint64 `json:"token_failures"`
	} `json:"samples"`
}

// activity asks h for its activity samples after seq, as a session
// granting every topic.
func activity(t *testing.T, h *mercure.Hub, after uint64) activityDoc {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, debugPath+"activity?after="+strconv.FormatUint(after, 10), nil))
	var doc activityDoc
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &doc) != nil {
		t.Fatalf("activity: %d %s", rec.Code, rec.Body)
	}
	return doc
}

// The hub samples its counters every second and keeps five minutes of
// samples, whoever asks: a page opened late sees what happened, and no
// client can make the hub keep more. A page asks for the samples after
// the last it has.
func TestDebugger_ActivitySamples(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		everyone := func(*http.Request) (*mercure.Access, error) {
			return &mercure.Access{Subscribe: []mercure.Match{{Pattern: "*"}}}, nil
		}
		h, err := mercure.New(testHubURL, mercure.WithDebugger(), mercure.WithInsecurePublishing(),
			mercure.WithAuthorizer(everyone, time.Minute), mercure.WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Shutdown(context.Background())
		for range 3 {
			if _, err := h.Publish(t.Context(), mercure.Update{Topics: []string{"https://example.com/a"}}); err != nil {
				t.Fatal(err)
			}
		}
		for _, body := range []string{"data=no-topic", "topic=*"} { // 400 each
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/.well-known/mercure", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("POST %s: %d", body, rec.Code)
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()

		doc := activity(t, h, 0)
		if doc.Interval != 1000 || len(doc.Samples) != 2 {
			t.Fatalf("after a second: interval %d, %d samples, want 1000 and 2", doc.Interval, len(doc.Samples))
		}
		first, last := doc.Samples[0], doc.Samples[1]
		if first.Seq != 1 || last.Seq != 2 || last.Time-first.Time != 1000 {
			t.Errorf("samples %d at %d and %d at %d, want 1 and 2 a second apart", first.Seq, first.Time, last.Seq, last.Time)
		}
		if last.Published != 3 {
			t.Errorf("published %d, want 3", last.Published)
		}
		refused := map[string]uint64{}
		for i, l := range doc.RefusedLabels {
			refused[l] = last.Refused[i]
		}
		if refused["400"] != 2 || len(last.Tokens) != len(doc.TokenLabels) || len(doc.TokenLabels) == 0 {
			t.Errorf("refusals %v, token failures %v %v; want two 400s", refused, doc.TokenLabels, last.Tokens)
		}
		if got := activity(t, h, last.Seq).Samples; len(got) != 0 {
			t.Errorf("after the last sample: %d samples, want none", len(got))
		}

		time.Sleep(10 * time.Minute)
		synctest.Wait()
		all := activity(t, h, 0).Samples
		if len(all) != 300 {
			t.Fatalf("after ten minutes: %d samples, want the last 300 (five minutes)", len(all))
		}
		for i, s := range all {
			if want := all[len(all)-1].Seq - uint64(len(all)-1-i); s.Seq != want {
				t.Fatalf("sample %d has seq %d, want %d: the samples are not the latest in order", i, s.Seq, want)
			}
		}
		// A page that counted the samples of an earlier hub gets them all.
		if got := activity(t, h, 1<<62).Samples; len(got) != 300 {
			t.Errorf("after a seq ahead of the hub: %d samples, want 300", len(got))
		}
	})
}
