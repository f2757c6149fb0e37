package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mercurekit/mercure"
)

// PublishTx records u in the application's transaction tx and returns its
// id: the update is delivered, once, to the subscribers of every hub
// sharing the store if and only if tx commits, after it commits; on
// rollback it never existed. u is checked first (see [WithValidator]),
// and gets a random "urn:uuid:" id when it has none, as from
// [mercure.Hub.Publish].
//
// Its position in the hub-wide order is given when tx commits, after
// every update committed before it (see the package documentation): a
// transaction held open does not hold back the updates of others.
// Committing sends a NOTIFY, which wakes the feeds at once; PostgreSQL
// serialises the commits of notifying transactions, which bounds the
// rate of transactions that publish (see the README's figures).
func (s *Store) PublishTx(ctx context.Context, tx pgx.Tx, u mercure.Update) (id string, err error) {
	sqlText, args, id, err := s.prepare(u)
	if err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, sqlText, args...); err != nil {
		return "", fmt.Errorf("pgstore: publish: %w", err)
	}
	return id, nil
}

// PublishSQLTx is [Store.PublishTx] for a database/sql transaction, on a
// *sql.DB opened with pgx's stdlib driver (github.com/jackc/pgx/v5/stdlib)
// or another PostgreSQL driver that takes $1 parameters.
func (s *Store) PublishSQLTx(ctx context.Context, tx *sql.Tx, u mercure.Update) (id string, err error) {
	sqlText, args, id, err := s.prepare(u)
	if err != nil {
		return "", err
	}
	args[1] = string(args[1].([]byte)) // json as text: any driver takes it
	if _, err := tx.ExecContext(ctx, sqlText, args...); err != nil {
		return "", fmt.Errorf("pgstore: publish: %w", err)
	}
	return id, nil
}

// prepare validates u and returns the statement that records it.
func (s *Store) prepare(u mercure.Update) (string, []any, string, error) {
	if s.closed() {
		return "", nil, "", ErrClosed
	}
	u.Topics = slices.Clone(u.Topics)
	if u.Retry != nil {
		r := *u.Retry
		u.Retry = &r
	}
	if err := s.cfg.validate(u); err != nil {
		return "", nil, "", err
	}
	if u.ID == "" {
		u.ID = "urn:uuid:" + uuid.NewString() // random, as the hub's (REC-12)
	}
	e := &mercure.Event{Update: u, Time: time.Now()}
	body, err := marshal(e)
	if err != nil {
		return "", nil, "", err
	}
	return s.n.insertNotify, []any{e.ID, body, e.Time}, u.ID, nil
}
