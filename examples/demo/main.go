// Command demo is a shared task board that embeds a Mercure hub: the
// hub authorizes the browsers' streams with the application's own session
// (mercure.WithAuthorizer: no token to mint, and logging out ends the
// streams), the application publishes from the very handlers that change
// its state, and serves the hub on its own mux. Scripts publish over HTTP
// with an access token: the demo prints a command that does.
//
//	go run ./examples/demo -addr localhost:8080
//
// Open http://localhost:8080/ in a normal window and in a private one (the
// windows of one browser profile share the session cookie, so they would be
// the same user), log in as different users, add and assign tasks, and
// watch the other window follow.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	addr := fs.String("addr", "localhost:8080", "listen address (plain HTTP)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a, err := newApp("http://"+*addr, DefaultRecheck)
	if err != nil {
		return err
	}
	tok, err := a.scriptToken(time.Hour)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: *addr, Handler: a, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("task board: open http://%s/ (hub at %s)\n", *addr, a.hub.URL())
	// The token path: a script sends bob a notification (the token is
	// valid for an hour and grants publish on notification topics only).
	fmt.Printf("notify bob from a script:\n  curl -H 'Authorization: Bearer %s' -d private=on -d topic=%s --data-urlencode 'data={\"kind\":\"notification\",\"text\":\"hello from a script\"}' %s\n",
		tok, url.QueryEscape(a.notificationTopic("bob")), a.hub.URL())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.hub.Shutdown(sctx) // streams first: the server would wait for them
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
