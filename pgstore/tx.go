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
// rollback it never existed. u is checked first, with the rules of the
// hub using the store (see [WithValidator]), and gets a random
// "urn:uuid:" id when it has none, as from [mercure.Hub.Publish]; that
// hub counts it in its metrics (source "tx").
//
// tx may have any isolation level. PublishTx only inserts a row, which
// reads nothing: a REPEATABLE READ or SERIALIZABLE transaction is no more
// likely to fail for it (the store's own statements read committed data
// and take no predicate locks), and one that fails on a serialization
// error takes the update with it, as a rollback does; retry the whole
// transaction. The update's position is given after the commit in every
// case. A transaction retried after a lost COMMIT answer records the
// update again, as it writes the application's rows again: retries are
// recognised for appends (see [mercure.Store.Append]), not here.
//
// Its position in the hub-wide order is given when tx commits, after
// every update committed before it (see the package documentation): a
// transaction held open does not hold back the updates of others.
// Committing sends a NOTIFY, which wakes the feeds at once; PostgreSQL
// serialises the commits of notifying transactions, which bounds the
// rate of transactions that publish (see docs/performance.md).
func (s *Store) PublishTx(ctx context.Context, tx pgx.Tx, u mercure.Update) (id string, err error) {
	sqlText, args, id, link, err := s.prepare(u)
	if err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, sqlText, args...); err != nil {
		return "", fmt.Errorf("pgstore: publish: %w", err)
	}
	if link != nil {
		link.Published()
	}
	return id, nil
}

// PublishSQLTx is [Store.PublishTx] for a database/sql transaction, on a
// *sql.DB opened with pgx's stdlib driver (github.com/jackc/pgx/v5/stdlib)
// or another PostgreSQL driver that takes $1 parameters.
func (s *Store) PublishSQLTx(ctx context.Context, tx *sql.Tx, u mercure.Update) (id string, err error) {
	sqlText, args, id, link, err := s.prepare(u)
	if err != nil {
		return "", err
	}
	args[1] = string(args[1].([]byte)) // json as text: any driver takes it
	if _, err := tx.ExecContext(ctx, sqlText, args...); err != nil {
		return "", fmt.Errorf("pgstore: publish: %w", err)
	}
	if link != nil {
		link.Published()
	}
	return id, nil
}

// prepare validates u and returns the statement that records it, and
// the link of the hub that checked it, if any.
func (s *Store) prepare(u mercure.Update) (string, []any, string, *mercure.HubLink, error) {
	if s.closed() {
		return "", nil, "", nil, ErrClosed
	}
	u.Topics = slices.Clone(u.Topics)
	if u.Retry != nil {
		r := *u.Retry
		u.Retry = &r
	}
	validate, link := s.validator()
	if err := validate(u); err != nil {
		return "", nil, "", nil, err
	}
	if u.ID == "" {
		u.ID = "urn:uuid:" + uuid.NewString() // random, as the hub's (REC-12)
	}
	e := &mercure.Event{Update: u, Time: time.Now()}
	body, digest, err := marshal(e)
	if err != nil {
		return "", nil, "", nil, err
	}
	return s.n.insertNotify, []any{e.ID, body, e.Time, len(body), digest[:]}, u.ID, link, nil
}

// validator returns the check of PublishTx: WithValidator's, or the
// latest attached hub's (with its link), or mercure.ValidateUpdate.
func (s *Store) validator() (func(mercure.Update) error, *mercure.HubLink) {
	s.hubs.Lock()
	defer s.hubs.Unlock()
	var link *mercure.HubLink
	if n := len(s.hubs.links); n > 0 {
		link = s.hubs.links[n-1]
	}
	switch {
	case s.cfg.validate != nil:
		return s.cfg.validate, link
	case link != nil:
		return link.Validate, link
	}
	return mercure.ValidateUpdate, nil
}

// AttachHub implements [mercure.OutboxStore]: [mercure.New] calls it, so
// that PublishTx checks updates with the hub's rules (unless
// [WithValidator] says otherwise) and counts them in its metrics, until
// the hub's Shutdown detaches it. With several hubs on one Store, the
// latest attached is used.
func (s *Store) AttachHub(link mercure.HubLink) (detach func()) {
	l := &link
	s.hubs.Lock()
	s.hubs.links = append(s.hubs.links, l)
	s.hubs.Unlock()
	return func() {
		s.hubs.Lock()
		s.hubs.links = slices.DeleteFunc(s.hubs.links, func(x *mercure.HubLink) bool { return x == l })
		s.hubs.Unlock()
	}
}
