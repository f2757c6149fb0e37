package pgtest

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mercurekit/mercure/storetest"
)

// DB is what [Drop] and [Leftovers] need of a database: a *pgx.Conn or a
// *pgxpool.Pool.
type DB interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// dropSQL drops the tables (with what depends on them, in the order
// they were made) and then the functions of the current schema whose
// names start with "PFX_".
const dropSQL = `DO $$
DECLARE
	o text;
BEGIN
	FOR o IN SELECT oid::regclass::text FROM pg_class
		WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace AND starts_with(relname, 'PFX_')
		ORDER BY oid
	LOOP
		EXECUTE 'DROP TABLE IF EXISTS ' || o || ' CASCADE';
	END LOOP;
	FOR o IN SELECT oid::regprocedure::text FROM pg_proc
		WHERE pronamespace = current_schema()::regnamespace AND starts_with(proname, 'PFX_')
	LOOP
		EXECUTE 'DROP FUNCTION ' || o;
	END LOOP;
END
$$`

// dropWithin bounds Drop, retries included.
const dropWithin = 10 * time.Second

// Drop drops the tables and functions of the current schema whose names
// start with prefix+"_", whichever a version of pgstore created under the
// prefix: what a test that used it leaves, once its stores are closed.
//
// A closed store's last query may still run on the server for a moment
// (pgx abandons a cancelled query by closing its connection, and the
// server finds out when it next writes to it), holding locks that the
// drop then waits for; when the two deadlock, PostgreSQL aborts one of
// them, the drop at times (SQLSTATE 40P01). Drop tries again then, for
// 10 s at most.
func Drop(db DB, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), dropWithin)
	defer cancel()
	var err error
	storetest.Within(dropWithin, func() bool {
		_, err = db.Exec(ctx, strings.ReplaceAll(dropSQL, "PFX", prefix))
		var pe *pgconn.PgError
		return !errors.As(err, &pe) || pe.Code != "40P01" || ctx.Err() != nil
	})
	return err
}

// Leftovers lists what the database holds under prefix: the relations
// (of any schema) and functions whose names start with prefix+"_".
func Leftovers(db DB, prefix string) ([]string, error) {
	rows, err := db.Query(context.Background(), `SELECT relname::text FROM pg_class WHERE starts_with(relname, $1)
		UNION ALL SELECT proname::text FROM pg_proc WHERE starts_with(proname, $1)`, prefix+"_")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
