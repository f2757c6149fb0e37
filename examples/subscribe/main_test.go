package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
	"github.com/mercurekit/mercure/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The command prints one JSON object a line, in order, from the cursor
// given, and stops cleanly when interrupted.
func TestRun(t *testing.T) {
	hub, err := mercure.New("https://example.com/.well-known/mercure")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	defer hub.Shutdown(context.Background())
	ctx := context.Background()
	first, _ := hub.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/books/1"}, Data: "skipped"})
	hub.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/books/1"}, ID: "b1", Data: "line 1\nline \"2\""})
	hub.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/authors/1"}, ID: "a1", Type: "author", Data: "<x>"})
	hub.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/other"}, ID: "o1"})

	ctx, cancel := context.WithTimeout(ctx, storetest.Deadline)
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-hub", srv.URL + "/.well-known/mercure", "-match", "https://example.com/books/1",
			"-match-urlpattern", "https://example.com/authors/:id", "-last-event-id", first}, w, io.Discard)
		w.Close()
	}()
	sc := bufio.NewScanner(r)
	want := []string{
		`{"id":"b1","type":"message","data":"line 1\nline \"2\""}`,
		`{"id":"a1","type":"author","data":"<x>"}`,
	}
	for _, line := range want {
		if !sc.Scan() {
			t.Fatalf("no line: %v", sc.Err())
		}
		if sc.Text() != line {
			t.Errorf("got %s, want %s", sc.Text(), line)
		}
		var v map[string]string
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Error(err)
		}
	}
	cancel()
	go io.Copy(io.Discard, r)
	if err := <-done; err != nil {
		t.Errorf("run after interruption: %v", err)
	}
}

// A refusal ends the command with the hub's status.
func TestRun_Refused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	err := run(context.Background(), []string{"-hub", srv.URL, "-match", "*", "-token", "x"}, io.Discard, io.Discard)
	if !errors.Is(err, client.ErrUnauthorized) || !strings.Contains(err.Error(), "invalid_token") {
		t.Fatalf("got %v", err)
	}
}
