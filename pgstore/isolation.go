package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Every statement of the store reads committed data (READ COMMITTED),
// whatever the isolation level the database or the role gives
// transactions by default (default_transaction_isolation):
//
//   - the sequencer's functions take the advisory lock, then read the
//     counter: under REPEATABLE READ or SERIALIZABLE they would read it in
//     a snapshot taken before the lock was theirs, stale, and number
//     events that another store numbered meanwhile (the insert then
//     fails on the unique seq, and the publish with it);
//   - a read under SERIALIZABLE takes predicate locks, with which the
//     application's serializable transactions that record updates
//     (PublishTx) could fail;
//   - a migration under REPEATABLE READ would not see the version that
//     another store's migration committed while it waited for the lock.
//
// The feed's connection is the store's own: it is set to READ COMMITTED
// once. A statement on the application's pool runs in a transaction that
// says so, sent with it in one round trip.

// setReadCommitted makes READ COMMITTED the default of conn's session.
const setReadCommitted = `SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED`

// With WithSynchronousReplication, the transactions that record or
// number events (the sequencer's appends, and the feed's rounds) commit
// with synchronous_commit on, whatever the database or the role sets by
// default: off, local or remote_write would acknowledge an update that a
// failover can lose (remote_write: once the standby's kernel has it).
// remote_apply, stronger, is left as it is. The feed's connection
// is set so once; an append's transaction says so, sent with it in the
// same round trip. Without the option, the store leaves
// synchronous_commit alone.

// syncCommitSession and syncCommitLocal raise synchronous_commit to on,
// for the session or the transaction.
const (
	syncCommitSession = `SELECT set_config('synchronous_commit', 'on', false) WHERE current_setting('synchronous_commit') <> 'remote_apply'`
	syncCommitLocal   = `SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') <> 'remote_apply'`
)

// query runs sql on the pool in a READ COMMITTED transaction, in one round
// trip, and passes its rows to scan, which must read them all. A failure
// leaves the connection in a failed transaction, which the pool closes
// rather than reuse.
func (s *Store) query(ctx context.Context, sql string, args []any, scan func(pgx.Rows) error) error {
	return s.send(ctx, false, sql, args, scan)
}

// record is query for a statement that records events: with
// WithSynchronousReplication, its transaction commits with
// synchronous_commit on.
func (s *Store) record(ctx context.Context, sql string, args []any, scan func(pgx.Rows) error) error {
	return s.send(ctx, s.cfg.syncRep, sql, args, scan)
}

func (s *Store) send(ctx context.Context, sync bool, sql string, args []any, scan func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	if sync {
		b.Queue(syncCommitLocal)
	}
	b.Queue(sql, args...)
	b.Queue(`COMMIT`)
	br := s.pool.SendBatch(ctx, b)
	if err := s.queryBatch(br, sync, scan); err != nil {
		br.Close()
		return err
	}
	return br.Close()
}

func (s *Store) queryBatch(br pgx.BatchResults, sync bool, scan func(pgx.Rows) error) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	if sync {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	err = scan(rows)
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return err
	}
	_, err = br.Exec()
	return err
}
