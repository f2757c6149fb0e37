package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SchemaVersion is the version of the tables this package writes. The
// table prefix+"_schema" records the version a database holds: New
// creates the tables at this version, migrates older ones, and refuses a
// newer one (written by a later release) with [ErrSchema].
const SchemaVersion = 1

// names holds the identifiers and statements of one table prefix.
type names struct {
	prefix               string
	events, meta         string
	hubs, subs, schema   string
	channel, txChannel   string // NOTIFY channels: sequenced, committed
	seqLock, migrateLock int64  // advisory lock keys

	appendBatch, insertNotify, sequence, feed, replayStart, replayPage, latest, prune, pruneAge string
}

func newNames(prefix string) *names {
	n := &names{
		prefix:    prefix,
		events:    prefix + "_events",
		meta:      prefix + "_meta",
		hubs:      prefix + "_hubs",
		subs:      prefix + "_subs",
		schema:    prefix + "_schema",
		channel:   prefix + "_seq",
		txChannel: prefix + "_new",
	}
	h := fnv.New64a()
	h.Write([]byte("mercurekit/pgstore:" + prefix))
	n.seqLock = int64(h.Sum64())
	n.migrateLock = n.seqLock ^ 1
	r := strings.NewReplacer("EV", n.events, "META", n.meta, "CHAN", n.channel, "TXCH", n.txChannel, "PFX", prefix)
	n.appendBatch = r.Replace(`SELECT rseq FROM PFX_append($1, $2::text[], $3::json[], $4::timestamptz[], $5)`)
	// The NOTIFY is sent when the application's transaction commits,
	// and not at all when it rolls back.
	n.insertNotify = r.Replace(`WITH n AS (SELECT pg_notify('TXCH', '')) INSERT INTO EV (update_id, body, at) SELECT $1, $2, $3 FROM n`)
	n.sequence = r.Replace(`SELECT PFX_sequence($1, $2)`)
	n.feed = r.Replace(`SELECT seq, body FROM EV WHERE seq > $1 ORDER BY seq LIMIT $2`)
	n.replayStart = r.Replace(`SELECT m.last_seq,
		(SELECT min(seq) FROM EV WHERE update_id = $1 AND seq IS NOT NULL AND seq <= m.last_seq),
		(SELECT min(seq) FROM EV WHERE seq IS NOT NULL)
		FROM META m`)
	n.replayPage = r.Replace(`SELECT seq, body FROM EV WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3`)
	n.latest = r.Replace(`SELECT m.last_seq, coalesce((SELECT update_id FROM EV WHERE seq = m.last_seq), '') FROM META m`)
	// Retention by age deletes a prefix of the sequence, at most $2
	// events at a time, so that the retained history has no hole.
	n.prune = r.Replace(`DELETE FROM EV WHERE seq IS NOT NULL AND seq <= least($1::bigint, (SELECT min(seq) FROM EV WHERE seq IS NOT NULL) + $2::bigint)`)
	n.pruneAge = r.Replace(`SELECT coalesce(max(seq), 0) FROM (SELECT seq, at FROM EV WHERE seq IS NOT NULL ORDER BY seq LIMIT $2) o WHERE at < now() - make_interval(secs => $1)`)
	return n
}

// migrations[v] takes the schema from version v to v+1.
func (n *names) migrations() []string {
	r := strings.NewReplacer("EV", n.events, "META", n.meta, "HUBS", n.hubs, "SUBS", n.subs,
		"CHAN", n.channel, "PFX", n.prefix, "SEQLOCK", fmt.Sprint(n.seqLock))
	return []string{r.Replace(`
CREATE TABLE EV (
	id bigserial PRIMARY KEY,
	seq bigint UNIQUE,
	update_id text NOT NULL,
	body json NOT NULL,
	at timestamptz NOT NULL
);
CREATE INDEX EV_unsequenced ON EV (id) WHERE seq IS NULL;
CREATE INDEX EV_update_id ON EV (update_id, seq);
CREATE TABLE META (one boolean PRIMARY KEY DEFAULT true CHECK (one), last_seq bigint NOT NULL, pruned bigint NOT NULL);
INSERT INTO META (last_seq, pruned) VALUES (0, 0);
CREATE TABLE HUBS (hub uuid PRIMARY KEY, expires timestamptz NOT NULL);
CREATE TABLE SUBS (hub uuid NOT NULL, id text NOT NULL, doc json NOT NULL, PRIMARY KEY (hub, id));

-- PFX_sequence stamps the committed events that have no seq yet (those
-- of applications' transactions), in insert order, with the next numbers
-- of the sequence, at most lim of them. One caller at a time holds the advisory lock, until its transaction commits, and each
-- statement reads a fresh snapshot: a caller sees every stamp of the
-- callers before it, so that the stamped events are always a prefix of
-- the sequence without a hole, in the order readers see them. With keep
-- > 0, a round that stamps events also deletes those more than keep
-- behind the last, in batches of a slack of keep/64 (1 to 100), at most
-- 1000 at once: retention is done by the time the appends return.
CREATE FUNCTION PFX_sequence(lim int, keep bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
	last bigint;
	done bigint;
	n bigint;
	cut bigint;
	ids bigint[];
BEGIN
	PERFORM pg_advisory_xact_lock(SEQLOCK);
	SELECT last_seq, pruned INTO last, done FROM META;
	-- The ids first, then an update by primary key: a join on the
	-- table would let a cached plan scan it whole.
	SELECT array_agg(id ORDER BY id) INTO ids FROM (
		SELECT id FROM EV WHERE seq IS NULL ORDER BY id LIMIT lim
	) c;
	UPDATE EV SET seq = last + u.ord FROM unnest(ids) WITH ORDINALITY AS u(id, ord) WHERE EV.id = u.id;
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n > 0 THEN
		cut := last + n - keep;
		IF keep > 0 AND cut - done >= least(greatest(keep / 64, 1), 100) THEN
			cut := least(cut, done + 1000);
			DELETE FROM EV WHERE seq > done AND seq <= cut;
			done := cut;
		END IF;
		UPDATE META SET last_seq = last + n, pruned = done;
		PERFORM pg_notify('CHAN', (last + n)::text);
	END IF;
END
$fn$;

-- PFX_append records a batch of a store's own appends, numbered at once:
-- under the sequencer's lock it stamps the committed events that have no
-- seq yet (those of applications' transactions), as PFX_sequence does,
-- then inserts the batch with the next numbers, in the arrays' order, and
-- returns their seqs. Each event is written once, with its seq: no
-- update, no entry in the index of unsequenced events. Retention as in
-- PFX_sequence.
CREATE FUNCTION PFX_append(lim int, uids text[], bodies json[], ats timestamptz[], keep bigint) RETURNS TABLE (rseq bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
	last bigint;
	done bigint;
	n bigint;
	cut bigint;
	ids bigint[];
BEGIN
	PERFORM pg_advisory_xact_lock(SEQLOCK);
	SELECT last_seq, pruned INTO last, done FROM META;
	SELECT array_agg(id ORDER BY id) INTO ids FROM (
		SELECT id FROM EV WHERE seq IS NULL ORDER BY id LIMIT lim
	) c;
	UPDATE EV SET seq = last + u.ord FROM unnest(ids) WITH ORDINALITY AS u(id, ord) WHERE EV.id = u.id;
	GET DIAGNOSTICS n = ROW_COUNT;
	last := last + n;
	RETURN QUERY WITH ins AS (
		INSERT INTO EV (seq, update_id, body, at)
		SELECT last + u.ord, u.i, u.b, u.a FROM unnest(uids, bodies, ats) WITH ORDINALITY AS u(i, b, a, ord)
		ORDER BY u.ord RETURNING seq
	) SELECT ins.seq FROM ins ORDER BY ins.seq;
	n := cardinality(uids);
	IF n > 0 THEN
		cut := last + n - keep;
		IF keep > 0 AND cut - done >= least(greatest(keep / 64, 1), 100) THEN
			cut := least(cut, done + 1000);
			DELETE FROM EV WHERE seq > done AND seq <= cut;
			done := cut;
		END IF;
	END IF;
	UPDATE META SET last_seq = last + n, pruned = done;
	PERFORM pg_notify('CHAN', (last + n)::text);
END
$fn$;
`)}
}

// migrate brings the schema to SchemaVersion, under an advisory lock so
// that stores starting together do not race.
func migrate(ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}, n *names) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, n.migrateLock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+n.schema+` (version int NOT NULL)`); err != nil {
		return err
	}
	var v int
	err = tx.QueryRow(ctx, `SELECT version FROM `+n.schema).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := tx.Exec(ctx, `INSERT INTO `+n.schema+` VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: %s is at version %d, this package knows %d", ErrSchema, n.schema, v, SchemaVersion)
	}
	if v == SchemaVersion {
		return nil // nothing written: the rollback only releases the lock
	}
	for _, m := range n.migrations()[v:] {
		if _, err := tx.Exec(ctx, m); err != nil {
			return fmt.Errorf("migrating %s from version %d: %w", n.schema, v, err)
		}
		v++
	}
	if _, err := tx.Exec(ctx, `UPDATE `+n.schema+` SET version = $1`, v); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
