package storetest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"
)

// Stream is one subscriber's stream, for tests of stores shared by
// several hub instances: it reads the ids of the stream's events.
type Stream struct {
	IDs    chan string // the ids of the events read, in order (not the position a stream starts with)
	Header http.Header // the response's
	cancel context.CancelFunc
	done   chan struct{}
}

// Subscribe opens a stream on the hub that srv serves at path with the
// query q (e.g. "match=..."), resuming after lastEventID when it is not
// empty; it fails t unless the hub answers 200. The stream is closed when
// t ends.
func Subscribe(t testing.TB, srv *httptest.Server, path, q, lastEventID string) *Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path+"?"+q, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("subscribe: %s: %s", resp.Status, body)
	}
	s := &Stream{IDs: make(chan string, 1000), Header: resp.Header, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		// As EventSource reads: an event is a block with data; a block
		// with only an id (the stream's starting position) fires none.
		sc := bufio.NewScanner(resp.Body)
		var id string
		var data bool
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data && id != "" {
					s.IDs <- id
				}
				id, data = "", false
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data:"):
				data = true
			}
		}
	}()
	t.Cleanup(s.Close)
	return s
}

// Close ends the stream and waits for its reader.
func (s *Stream) Close() { s.cancel(); <-s.done }

// Ended is closed once the stream has ended, by the hub or by Close, and
// its reader has sent every id it read.
func (s *Stream) Ended() <-chan struct{} { return s.done }

// Read returns the ids read so far that no call took yet, without
// waiting.
func (s *Stream) Read() []string {
	var ids []string
	for {
		select {
		case id := <-s.IDs:
			ids = append(ids, id)
		default:
			return ids
		}
	}
}

// Collect reads ids until want have been read or none comes for
// Deadline, then any extra one that comes within 200 ms.
func (s *Stream) Collect(want int) []string {
	var got []string
	for len(got) < want {
		select {
		case id := <-s.IDs:
			got = append(got, id)
		case <-time.After(Deadline):
			return got
		}
	}
	select { // anything extra?
	case id := <-s.IDs:
		got = append(got, id)
	case <-time.After(200 * time.Millisecond):
	}
	return got
}

// SubscriptionIDs returns, sorted, the ids of the active subscriptions
// that s lists: those of every hub sharing it.
func SubscriptionIDs(ctx context.Context, s store.SubscriptionStore) ([]string, error) {
	subs, err := s.Subscriptions(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(subs))
	for _, sub := range subs {
		ids = append(ids, sub.ID)
	}
	slices.Sort(ids)
	return ids, nil
}
