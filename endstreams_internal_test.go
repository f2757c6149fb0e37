package mercure

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/testwait"
	"github.com/mercurekit/mercure/store"
)

// An EndStreams instruction that the feed delivers ends only the streams
// indexed before it: one delivered again, or late (after an outage of the
// feed), never ends a stream opened after its place in the feed, such as
// the stream of a user who logged in again.
func TestEndStreams_OnlyStreamsBeforeTheInstruction(t *testing.T) {
	t.Parallel()
	authorize := func(r *http.Request) (*Access, error) {
		return &Access{Subject: "alice", Session: "s1", Subscribe: []Match{{Pattern: "*"}}}, nil
	}
	h, err := New("https://example.com/.well-known/mercure", WithAuthorizer(authorize, time.Hour), WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Shutdown(context.Background())
	for range 3 {
		if _, err := h.Publish(t.Context(), Update{Topics: []string{"https://example.com/a"}}); err != nil {
			t.Fatal(err)
		}
	}
	at := h.sessions.owners.seq.Load() // the stream opens after the feed delivered this
	if at == 0 {
		t.Fatal("the feed's position is not recorded")
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/.well-known/mercure?match=*", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("subscribe: %v %v", res, err)
	}
	defer res.Body.Close()
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, res.Body); close(ended) }()

	instruction := func(seq uint64) *store.Event {
		data, _ := json.Marshal(StreamFilter{Subject: "alice"}.selector())
		return &store.Event{Topics: []string{h.endStreamsTopic()}, Data: string(data), Private: true, ID: "urn:uuid:x", Type: "mercure", Seq: seq}
	}
	var s *subscriber
	h.sessions.owners.mu.Lock()
	for s = range h.sessions.owners.streams[streamSelector{Subject: ownerHash("sub", "alice")}] {
	}
	h.sessions.owners.mu.Unlock()
	if s == nil {
		t.Fatal("the stream is not indexed by its subject")
	}
	listen := h.listener()
	for _, seq := range []uint64{1, at} { // before the stream, and its own position
		listen.Event(instruction(seq)) // acts before it returns
		if s.stream.Ending() {
			t.Fatalf("an instruction at %d ended a stream opened at %d", seq, at)
		}
	}
	listen.Event(instruction(at + 1))
	select {
	case <-ended:
	case <-time.After(testwait.Deadline):
		t.Fatal("an instruction after the stream's opening did not end it")
	}
}
