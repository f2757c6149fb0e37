package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/mercurekit/mercure/store"

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
// recognised for appends (see [store.Store.Append]), not here.
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
func (s *Store) prepare(u mercure.Update) (string, []any, string, *store.HubLink, error) {
	if s.closed() {
		return "", nil, "", nil, ErrClosed
	}
	// Own the caller's slices and pointers before checking them.
	e := &store.Event{ID: u.ID, Topics: slices.Clone(u.Topics), Data: u.Data, Private: u.Private, Type: u.Type}
	if u.Retry != nil {
		r := *u.Retry
		e.Retry = &r
	}
	validate, link := s.validator()
	if err := validate(e); err != nil {
		return "", nil, "", nil, err
	}
	if e.ID == "" {
		e.ID = "urn:uuid:" + uuid.NewString() // random, as the hub's (REC-12)
	}
	e.Time = time.Now()
	body, digest, err := marshal(e)
	if err != nil {
		return "", nil, "", nil, err
	}
	return s.n.insertNotify, []any{e.ID, body, e.Time, len(body), digest[:]}, e.ID, link, nil
}

// validator returns the check of PublishTx: WithValidator's, or the
// latest attached hub's (with its link), or mercure.ValidateUpdate.
func (s *Store) validator() (func(*store.Event) error, *store.HubLink) {
	s.hubs.Lock()
	defer s.hubs.Unlock()
	var link *store.HubLink
	if n := len(s.hubs.links); n > 0 {
		link = s.hubs.links[n-1]
	}
	switch {
	case s.cfg.validate != nil:
		return updateCheck(s.cfg.validate), link
	case link != nil:
		return link.Validate, link
	}
	return updateCheck(mercure.ValidateUpdate), nil
}

// updateCheck returns f as a check of an event's update.
func updateCheck(f func(mercure.Update) error) func(*store.Event) error {
	return func(e *store.Event) error {
		return f(mercure.Update{Topics: e.Topics, Data: e.Data, Private: e.Private, ID: e.ID, Type: e.Type, Retry: e.Retry})
	}
}

// AttachHub implements [store.OutboxStore]: [mercure.New] calls it, so
// that PublishTx checks updates with the hub's rules (unless
// [WithValidator] says otherwise) and counts them in its metrics, until
// the hub's Shutdown detaches it. With several hubs on one Store, the
// latest attached is used.
func (s *Store) AttachHub(link store.HubLink) (detach func()) {
	l := &link
	s.hubs.Lock()
	s.hubs.links = append(s.hubs.links, l)
	s.hubs.Unlock()
	return func() {
		s.hubs.Lock()
		s.hubs.links = slices.DeleteFunc(s.hubs.links, func(x *store.HubLink) bool { return x == l })
		s.hubs.Unlock()
	}
}
