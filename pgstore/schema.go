package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the version of the tables this package writes. The
// table prefix+"_schema" records the version a database holds: New
// creates the tables at this version, migrates older ones, and refuses a
// newer one (written by a later release) with [ErrSchema]. With
// [WithoutMigrations], the application runs the statements of
// [Migrations] itself.
//
// Version 2 records each event's size and a digest of its update, and
// appends with prefix+"_append2", which recognises retries; version 1's
// functions stay, so that the stores of the previous release append until
// they are replaced. Version 3 adds prefix+"_vanished", the ids of events
// a failover lost, which are unknown cursors for a day (see the package
// documentation).
const SchemaVersion = 3

// names holds the identifiers and statements of one table prefix.
type names struct {
	prefix               string
	events, meta         string
	hubs, subs, schema   string
	vanished             string
	channel, txChannel   string // NOTIFY channels: sequenced, committed
	seqLock, migrateLock int64  // advisory lock keys

	appendBatch, insertNotify, sequence, page, replayStart, latest, resync, prune, pruneAge string
	subsList, subsSweep, held, bury                                                         string
}

func newNames(prefix string) *names {
	n := &names{
		prefix:    prefix,
		events:    prefix + "_events",
		meta:      prefix + "_meta",
		hubs:      prefix + "_hubs",
		subs:      prefix + "_subs",
		schema:    prefix + "_schema",
		vanished:  prefix + "_vanished",
		channel:   prefix + "_seq",
		txChannel: prefix + "_new",
	}
	h := fnv.New64a()
	h.Write([]byte("mercurekit/pgstore:" + prefix))
	n.seqLock = int64(h.Sum64())
	n.migrateLock = n.seqLock ^ 1
	r := strings.NewReplacer("EV", n.events, "META", n.meta, "HUBS", n.hubs, "SUBS", n.subs,
		"VANISHED", n.vanished, "CHAN", n.channel, "TXCH", n.txChannel, "PFX", prefix)
	n.appendBatch = r.Replace(`SELECT rseq FROM PFX_append2($1, $2::text[], $3::json[], $4::timestamptz[], $5::int[], $6::bytea[], $7, make_interval(secs => $8))`)
	// The NOTIFY is sent when the application's transaction commits,
	// and not at all when it rolls back.
	n.insertNotify = r.Replace(`WITH n AS (SELECT pg_notify('TXCH', ''))
		INSERT INTO EV (update_id, body, at, bytes, digest) SELECT $1::text, $2::json, $3::timestamptz, $4::int, $5::bytea FROM n`)
	n.sequence = r.Replace(`SELECT PFX_sequence($1, $2)`)
	// A page of the feed or of a replay: the events after $1 up to $2,
	// at most $3 of them, and each only while those before it in the page
	// hold less than $4 bytes. The running sum reads the sizes alone; the
	// bodies are read for the rows of the page only. run tells the reader
	// whether it stopped at the bound. Rows of version 1 have no size:
	// their body's is taken.
	n.page = r.Replace(`WITH p AS (
		SELECT seq, coalesce(bytes, octet_length(body::text)) AS size,
			sum(coalesce(bytes, octet_length(body::text))) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS run
		FROM EV WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3
	) SELECT e.seq, e.body, p.run FROM p JOIN EV e USING (seq) WHERE p.run - p.size < $4 ORDER BY e.seq`)
	// The cursor $1 resolves to the oldest retained event with its id,
	// unless an event with that id vanished in a failover within a day.
	n.replayStart = r.Replace(`SELECT m.last_seq,
		(SELECT min(seq) FROM EV WHERE update_id = $1 AND seq IS NOT NULL AND seq <= m.last_seq
			AND NOT EXISTS (SELECT 1 FROM VANISHED v WHERE v.update_id = $1 AND v.at > now() - interval '1 day')),
		(SELECT min(seq) FROM EV WHERE seq IS NOT NULL)
		FROM META m`)
	// The events at the seqs $1, to compare with those the feed passed
	// on (see Store.bury).
	n.held = r.Replace(`SELECT seq, update_id, at FROM EV WHERE seq = ANY($1::bigint[])`)
	// Records the ids $1 of events that vanished, and forgets those of a
	// day ago.
	n.bury = r.Replace(`WITH old AS (DELETE FROM VANISHED WHERE at <= now() - interval '1 day')
		INSERT INTO VANISHED (update_id, at) SELECT DISTINCT unnest($1::text[]), now()
		ON CONFLICT (update_id) DO UPDATE SET at = excluded.at`)
	n.subsList = r.Replace(`SELECT s.id, s.doc FROM SUBS s JOIN HUBS h USING (hub) WHERE h.expires >= now() AND h.hub <> $1`)
	// The stores that stopped refreshing their row, at most $1 of them,
	// and their subscriptions.
	n.subsSweep = r.Replace(`WITH gone AS (
		DELETE FROM HUBS WHERE hub IN (SELECT hub FROM HUBS WHERE expires < now() ORDER BY expires LIMIT $1) RETURNING hub
	) DELETE FROM SUBS WHERE hub IN (SELECT hub FROM gone)`)
	// The latest event: its seq, and its id and time if it is retained;
	// and whether the server names synchronous standbys (see
	// WithSynchronousReplication).
	n.latest = r.Replace(`SELECT m.last_seq, coalesce(h.update_id, ''), h.at, current_setting('synchronous_standby_names') <> ''
		FROM META m LEFT JOIN EV h ON h.seq = m.last_seq`)
	// What a feed checks once connected (see Store.resync): the latest
	// event as n.latest, and whether the row at seq $1 holds the event
	// with id $2 and, unless $3 is null, time $3 (null: no row there).
	// The time is the event's, from its body, in nanoseconds; the column
	// has microseconds, which pgx truncates to and a driver sending text
	// (PublishSQLTx) may round to: they may differ by one.
	n.resync = r.Replace(`SELECT m.last_seq, coalesce(h.update_id, ''), h.at,
		(SELECT (e.update_id = $2 AND ($3::timestamptz IS NULL OR
			e.at BETWEEN $3::timestamptz - interval '1 microsecond' AND $3::timestamptz + interval '1 microsecond')) IS TRUE
			FROM EV e WHERE e.seq = $1)
		FROM META m LEFT JOIN EV h ON h.seq = m.last_seq`)
	// Retention by age deletes a prefix of the sequence, at most $2
	// events at a time, so that the retained history has no hole.
	n.prune = r.Replace(`DELETE FROM EV WHERE seq IS NOT NULL AND seq <= least($1::bigint, (SELECT min(seq) FROM EV WHERE seq IS NOT NULL) + $2::bigint)`)
	n.pruneAge = r.Replace(`SELECT coalesce(max(seq), 0) FROM (SELECT seq, at FROM EV WHERE seq IS NOT NULL ORDER BY seq LIMIT $2) o WHERE at < now() - make_interval(secs => $1)`)
	return n
}

// migrations[v] takes the schema from version v to v+1.
func (n *names) migrations() []string {
	r := strings.NewReplacer("EV", n.events, "META", n.meta, "HUBS", n.hubs, "SUBS", n.subs,
		"VANISHED", n.vanished, "CHAN", n.channel, "PFX", n.prefix, "SEQLOCK", fmt.Sprint(n.seqLock))
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
`), r.Replace(`
ALTER TABLE EV ADD COLUMN bytes int, ADD COLUMN digest bytea;

-- PFX_append2 is PFX_append for events that carry their size and digest:
-- an event is a retry when the latest event with its id has the same
-- digest and was recorded at most win before it; it is then not
-- inserted, and its rseq is that event's. The others are inserted as by
-- PFX_append. (A batch holds no two events of the same update: its
-- sender merges them.)
CREATE FUNCTION PFX_append2(lim int, uids text[], bodies json[], ats timestamptz[], sizes int[], digests bytea[], keep bigint, win interval) RETURNS TABLE (rseq bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
	last bigint;
	done bigint;
	n bigint;
	cut bigint;
	ids bigint[];
	found bigint[]; -- found[o]: the seq of the event that event o retries
	ks bigint[];    -- ks[o]: the rank of event o among those inserted
BEGIN
	PERFORM pg_advisory_xact_lock(SEQLOCK);
	SELECT last_seq, pruned INTO last, done FROM META;
	SELECT array_agg(id ORDER BY id) INTO ids FROM (
		SELECT id FROM EV WHERE seq IS NULL ORDER BY id LIMIT lim
	) c;
	UPDATE EV SET seq = last + u.ord FROM unnest(ids) WITH ORDINALITY AS u(id, ord) WHERE EV.id = u.id;
	GET DIAGNOSTICS n = ROW_COUNT;
	last := last + n;
	IF win > interval '0' THEN
		SELECT array_agg(r.seq ORDER BY u.ord) INTO found
		FROM unnest(uids, digests, ats) WITH ORDINALITY AS u(i, d, a, ord)
		LEFT JOIN LATERAL (
			SELECT l.seq FROM (
				SELECT seq, digest, at FROM EV WHERE update_id = u.i AND seq IS NOT NULL ORDER BY seq DESC LIMIT 1
			) l WHERE l.digest = u.d AND l.at >= u.a - win
		) r ON true;
	END IF;
	ks := array_fill(NULL::bigint, ARRAY[cardinality(uids)]);
	n := 0;
	FOR o IN 1 .. cardinality(uids) LOOP
		IF found[o] IS NULL THEN
			n := n + 1;
			ks[o] := n;
		END IF;
	END LOOP;
	INSERT INTO EV (seq, update_id, body, at, bytes, digest)
	SELECT last + ks[u.ord], u.i, u.b, u.a, u.s, u.d
	FROM unnest(uids, bodies, ats, sizes, digests) WITH ORDINALITY AS u(i, b, a, s, d, ord)
	WHERE ks[u.ord] IS NOT NULL ORDER BY u.ord;
	RETURN QUERY SELECT coalesce(found[o], last + ks[o]) FROM generate_subscripts(uids, 1) o ORDER BY o;
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
`), r.Replace(`
-- The ids of events that a failover lost: a client that got one must not
-- resume after a retry of its update that the new primary recorded later.
CREATE TABLE VANISHED (update_id text PRIMARY KEY, at timestamptz NOT NULL);
`)}
}

// Migrations returns the SQL that takes the tables of prefix (see
// [WithPrefix]) from schema version from (0: none) to [SchemaVersion], for
// an application that runs its migrations itself (see
// [WithoutMigrations]): scripts of several statements, to run in order in
// one transaction, the last of which records the version. Stores already
// running on the tables go on during the migration. It fails with an error
// wrapping [mercure.ErrInvalidOption] for a bad prefix, and with
// [ErrSchema] for a version it does not know.
func Migrations(prefix string, from int) ([]string, error) {
	if !prefixRE.MatchString(prefix) {
		return nil, invalid("table prefix %q is not a lowercase identifier of at most 40 characters", prefix)
	}
	if from < 0 || from > SchemaVersion {
		return nil, fmt.Errorf("%w: version %d, this package knows 0 to %d", ErrSchema, from, SchemaVersion)
	}
	n := newNames(prefix)
	var out []string
	if from == 0 {
		out = append(out, `CREATE TABLE IF NOT EXISTS `+n.schema+` (version int NOT NULL)`)
	}
	out = append(out, n.migrations()[from:]...)
	return append(out, fmt.Sprintf(`DELETE FROM %[1]s; INSERT INTO %[1]s VALUES (%[2]d)`, n.schema, SchemaVersion)), nil
}

// migrate brings the schema to SchemaVersion, under an advisory lock so
// that stores starting together do not race. It reads committed data: a
// snapshot taken before another store's migration committed would not see
// the version it wrote.
func migrate(ctx context.Context, pool *pgxpool.Pool, n *names) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, n.migrateLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+n.schema+` (version int NOT NULL)`); err != nil {
			return err
		}
		v, err := version(ctx, tx, n)
		if err != nil {
			return err
		}
		for _, m := range n.migrations()[v:] {
			if _, err := tx.Exec(ctx, m); err != nil {
				return fmt.Errorf("migrating %s from version %d: %w", n.schema, v, err)
			}
			v++
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+n.schema+`; INSERT INTO `+n.schema+` VALUES (`+fmt.Sprint(v)+`)`)
		return err
	})
}

// version returns the schema version the tables record, 0 for none, and
// fails with ErrSchema for a version this package does not know.
func version(ctx context.Context, q pgx.Tx, n *names) (int, error) {
	var v int
	err := q.QueryRow(ctx, `SELECT version FROM `+n.schema).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, err
	case v > SchemaVersion:
		return 0, fmt.Errorf("%w: %s is at version %d, this package knows %d", ErrSchema, n.schema, v, SchemaVersion)
	}
	return v, nil
}

// checkSchema fails with ErrSchema unless the tables are at
// SchemaVersion (see WithoutMigrations).
func checkSchema(ctx context.Context, pool *pgxpool.Pool, n *names) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, n.schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("%w: no table %s: create the tables with the statements of pgstore.Migrations", ErrSchema, n.schema)
		}
		v, err := version(ctx, tx, n)
		if err != nil {
			return err
		}
		if v != SchemaVersion {
			return fmt.Errorf("%w: %s is at version %d, this package needs %d: run pgstore.Migrations(%q, %d)", ErrSchema, n.schema, v, SchemaVersion, n.prefix, v)
		}
		return nil
	})
}
