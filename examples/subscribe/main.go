// Command subscribe prints the events of a Mercure hub, one JSON object a
// line, and keeps resuming after disconnections until it is interrupted.
//
//	go run ./examples/subscribe -hub http://localhost:3000/.well-known/mercure -match https://example.com/books/1
//
// Flags: -hub URL, repeated -match TOPIC and -match-urlpattern PATTERN,
// -token TOKEN (a bearer token), -last-event-id ID (a cursor to start
// after, or "earliest"). Each event is printed as
// {"id":"…","type":"…","data":"…"} and flushed; type is "message" when
// the event had none, as EventSource reports it. Reconnections and a hub
// that forgot the cursor are reported on stderr. It exits with status 1 when
// the hub refuses the subscription (400, 401, 403…).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mercurekit/mercure/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "subscribe:", err)
		os.Exit(1)
	}
}

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return fmt.Sprint(*l) }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("subscribe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var exact, patterns list
	hub := fs.String("hub", "", "hub URL (required)")
	fs.Var(&exact, "match", "exact topic, or * (repeatable)")
	fs.Var(&patterns, "match-urlpattern", "URL pattern (repeatable)")
	token := fs.String("token", "", "bearer token")
	lastEventID := fs.String("last-event-id", "", `cursor to resume after (an id, or "earliest")`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hub == "" || len(exact)+len(patterns) == 0 {
		fs.Usage()
		return errors.New("-hub and at least one -match or -match-urlpattern are required")
	}
	sub := client.Subscription{LastEventID: *lastEventID}
	for _, t := range exact {
		sub.Matchers = append(sub.Matchers, client.Exact(t))
	}
	for _, p := range patterns {
		sub.Matchers = append(sub.Matchers, client.URLPattern(p))
	}
	c := &client.Client{
		OnRetry: func(err error, d time.Duration) {
			fmt.Fprintf(stderr, "subscribe: %v; reconnecting in %v\n", err, d.Round(time.Millisecond))
		},
		OnConnect: func(conn client.Connection) {
			if conn.CursorLost() {
				fmt.Fprintf(stderr, "subscribe: the hub no longer knows event %q: events may be missing or repeated\n", conn.LastEventID)
			}
		},
	}
	if *token != "" {
		c.Token = client.StaticToken(*token)
	}
	enc := json.NewEncoder(stdout) // one Write per event: nothing to flush
	enc.SetEscapeHTML(false)
	for ev, err := range c.Subscribe(ctx, *hub, sub) {
		if err != nil {
			return err
		}
		typ := ev.Type
		if typ == "" {
			typ = "message"
		}
		if err := enc.Encode(struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data string `json:"data"`
		}{ev.ID, typ, ev.Data}); err != nil {
			return err
		}
	}
	return nil
}
