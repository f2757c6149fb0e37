// Command standalone runs a Mercure hub as its own server: the library's
// hub behind a 100-line main. Its flags follow the launch contract that
// black-box tools (load generators, protocol checkers) rely on.
//
//	go run ./examples/standalone -addr localhost:3000 -insecure-publish
//
// Open http://localhost:3000/, subscribe to a topic, then publish:
//
//	curl -d topic=https://example.com/books/1 -d data=hello http://localhost:3000/.well-known/mercure
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mercurekit/mercure"
)

//go:embed index.html
var indexHTML string

var page = template.Must(template.New("index").Parse(indexHTML))

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "standalone:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		addr            = flag.String("addr", "localhost:3000", "listen address (plain HTTP)")
		hubURL          = flag.String("hub-url", "", "public hub URL (default http://ADDR/.well-known/mercure)")
		history         = flag.Int("history", mercure.DefaultHistory, "number of past updates kept for reconnecting subscribers")
		insecurePublish = flag.Bool("insecure-publish", false, "accept publishes without a valid token (closed networks only!)")
		debug           = flag.Bool("debug", false, "log at debug level")
		// Flags of the launch contract whose features later versions bring.
		issuer         = flag.String("issuer", "", "trusted token issuer (iss)")
		publisherJWKS  = flag.String("publisher-jwks", "", "JWK Set file verifying publisher tokens")
		subscriberJWKS = flag.String("subscriber-jwks", "", "JWK Set file verifying subscriber tokens")
		anonymous      = flag.Bool("anonymous", false, "accept subscribers without a token")
		subscriptions  = flag.Bool("subscriptions", false, "enable active subscriptions")
		corsOrigins    = flag.String("cors-origins", "", "comma-separated browser origins allowed to subscribe")
		cookie         = flag.String("cookie", "", "name of the cookie carrying the access token")
	)
	flag.Parse()

	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	notYet := map[string]bool{
		"issuer": *issuer != "", "publisher-jwks": *publisherJWKS != "", "subscriber-jwks": *subscriberJWKS != "",
		"anonymous": *anonymous, "subscriptions": *subscriptions, "cors-origins": *corsOrigins != "", "cookie": *cookie != "",
	}
	for name, set := range notYet {
		if set {
			log.Warn("flag accepted but not in effect yet: this version of the hub does not implement it", "flag", "-"+name)
		}
	}
	if *hubURL == "" {
		*hubURL = "http://" + *addr + mercure.DefaultHubPath
	}
	opts := []mercure.Option{
		mercure.WithURL(*hubURL),
		mercure.WithHistory(*history),
		mercure.WithLogger(log),
	}
	if *insecurePublish {
		log.Warn("publishing without a token is enabled: anyone who can reach this hub can publish")
		opts = append(opts, mercure.WithInsecurePublishing())
	}
	hub, err := mercure.New(opts...)
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle(hub.Path(), hub)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, struct{ HubPath string }{hub.Path()})
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("hub listening", "addr", *addr, "hub_url", hub.URL())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hub.Shutdown(sctx) // streams first: the server would wait for them
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
