package pgstore_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
)

// publishTx records u with PublishTx in a transaction of its own.
func publishTx(s *pgstore.Store, tx pgx.Tx, u mercure.Update) error {
	_, err := s.PublishTx(context.Background(), tx, u)
	return err
}

// The hub using the store checks PublishTx's updates with its own rules
// and counts them, from New to Shutdown, with no option to set: a hub
// that authorizes no subscriber refuses a private update, as Publish
// does. WithValidator overrides it.
func TestPublishTxUsesTheHub(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	ctx := context.Background()
	s := open(t, pool, prefix)
	private := mercure.Update{Topics: []string{topic}, Data: "secret", Private: true}
	public := mercure.Update{Topics: []string{topic}, Data: "news"}
	inTx := func(u mercure.Update) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return publishTx(s, tx, u) })
	}
	if err := inTx(private); err != nil {
		t.Fatalf("no hub attached: a private update is checked by ValidateUpdate only, got %v", err)
	}
	h, err := mercure.New(hubURL, mercure.WithStore(s), mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Publish(ctx, private); !errors.Is(err, mercure.ErrInvalidUpdate) {
		t.Fatalf("Hub.Publish of a private update: %v, want ErrInvalidUpdate", err)
	}
	if err := inTx(private); !errors.Is(err, mercure.ErrInvalidUpdate) {
		t.Fatalf("PublishTx of a private update on the hub's store: %v, want ErrInvalidUpdate", err)
	}
	for range 2 {
		if err := inTx(public); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Metrics().UpdatesPublished; got["tx"] != 2 || got["go"] != 0 {
		t.Fatalf("UpdatesPublished %v, want tx 2", got)
	}
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inTx(private); err != nil {
		t.Fatalf("after the hub's Shutdown: %v, want the default check again", err)
	}

	own := open(t, pool, prefix, pgstore.WithValidator(func(mercure.Update) error { return errRefused }))
	h2, err := mercure.New(hubURL, mercure.WithStore(own), mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Shutdown(ctx)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return publishTx(own, tx, public) })
	if !errors.Is(err, errRefused) {
		t.Fatalf("WithValidator with a hub attached: %v, want its error", err)
	}
}
