package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/mercurekit/mercure/internal/testwait"
)

// Evidence for not building on go-sse v0.11.0 (see the package doc). Each
// test passes while the defect is there; one failing means go-sse changed
// and the choice can be revisited.

// sse.Read drops the retry field: its Event has no such field and Read
// passes no retry callback, so a hub's reconnection delay never reaches
// the caller.
func TestGoSSE_ReadDropsRetry(t *testing.T) {
	var fields []string
	for ev, err := range gosse.Read(strings.NewReader("id: 1\nretry: 5000\ndata: x\n\n"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields, ev.LastEventID, ev.Type, ev.Data)
	}
	if strings.Join(fields, "|") != "1||x" {
		t.Fatalf("got %q", fields)
	}
	// gosse.Event{LastEventID, Type, Data}: nowhere to put 5000 ms.
}

// Connection gives up on a 503 although its documentation says errors
// with a Temporary method are retried: every ResponseValidator error is
// final.
func TestGoSSE_ConnectionGivesUpOn503(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	c := &gosse.Client{
		Backoff: gosse.Backoff{InitialInterval: time.Millisecond},
		ResponseValidator: func(res *http.Response) error {
			if res.StatusCode >= 500 {
				return temporaryError{}
			}
			return gosse.DefaultValidator(res)
		},
	}
	err := c.NewConnection(req).Connect()
	if !errors.As(err, new(temporaryError)) || calls.Load() != 1 {
		t.Fatalf("Connect = %v after %d requests", err, calls.Load())
	}
}

type temporaryError struct{}

func (temporaryError) Error() string   { return "503" }
func (temporaryError) Temporary() bool { return true }
func (temporaryError) Timeout() bool   { return false }

// Connection deletes the caller's Last-Event-ID when it retries before
// any event arrived: a subscriber resuming from a cursor whose first
// connection drops restarts from "now", and misses what came in between.
func TestGoSSE_ConnectionDropsInitialCursor(t *testing.T) {
	var seen []string
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) == 1 {
			return // the stream ends before any event
		}
		w.Write([]byte("id: 2\ndata: x\n\n"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	req.Header.Set("Last-Event-ID", "cursor-1")
	conn := (&gosse.Client{Backoff: gosse.Backoff{InitialInterval: time.Millisecond}}).NewConnection(req)
	conn.SubscribeToAll(func(gosse.Event) { cancel() })
	conn.Connect()
	if len(seen) < 2 || seen[0] != "cursor-1" || seen[1] != "" {
		t.Fatalf("Last-Event-ID sent: %q", seen)
	}
}
