package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
	"github.com/mercurekit/mercure/storetest"
)

// TestInvalidOptions: options refuse bad values rather than clamp them.
func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]pgstore.Option{
		"prefix uppercase":      pgstore.WithPrefix("Mercure"),
		"prefix quoted":         pgstore.WithPrefix(`x"; DROP TABLE y; --`),
		"prefix empty":          pgstore.WithPrefix(""),
		"prefix too long":       pgstore.WithPrefix("a23456789012345678901234567890123456789012"),
		"negative max events":   pgstore.WithMaxEvents(-1),
		"negative max age":      pgstore.WithMaxAge(-1),
		"zero timeout":          pgstore.WithTimeout(0),
		"zero poll interval":    pgstore.WithPollInterval(0),
		"tiny subscription TTL": pgstore.WithSubscriptionTTL(1),
		"nil validator":         pgstore.WithValidator(nil),
		"negative retry window": pgstore.WithRetryWindow(-1),
	} {
		if _, err := pgstore.New(context.Background(), nil, o); !errors.Is(err, mercure.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := pgstore.New(context.Background(), nil); !errors.Is(err, mercure.ErrInvalidOption) {
		t.Errorf("nil pool: %v, want ErrInvalidOption", err)
	}
}

// TestSchemaVersion: tables of a later version are refused; a second
// store on the same tables does not migrate them again.
func TestSchemaVersion(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	s := open(t, pool, prefix)
	mustAppend(t, s, "kept")
	open(t, pool, prefix) // the same version: nothing to do
	if _, err := pool.Exec(context.Background(), `UPDATE `+prefix+`_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.New(context.Background(), pool, pgstore.WithPrefix(prefix)); !errors.Is(err, pgstore.ErrSchema) {
		t.Fatalf("tables at version 99: %v, want ErrSchema", err)
	}
}

// TestClosed: a closed store refuses calls with ErrClosed.
func TestClosed(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	s := open(t, pool, prefix)
	s.Close()
	ctx := context.Background()
	if err := s.Append(ctx, &store.Event{Topics: []string{"https://example.com/x"}, ID: "x"}); !errors.Is(err, pgstore.ErrClosed) {
		t.Fatalf("Append: %v", err)
	}
	if _, err := s.Replay(ctx, store.Earliest); !errors.Is(err, pgstore.ErrClosed) {
		t.Fatalf("Replay: %v", err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := s.PublishTx(ctx, tx, upd("x")); !errors.Is(err, pgstore.ErrClosed) {
		t.Fatalf("PublishTx: %v", err)
	}
}

// TestMaxAge: events older than WithMaxAge are deleted by the feed.
func TestMaxAge(t *testing.T) {
	t.Parallel()
	pool, prefix := db(t)
	s := open(t, pool, prefix, pgstore.WithMaxAge(3600e9))
	mustAppend(t, s, "old")
	if _, err := pool.Exec(context.Background(), `UPDATE `+prefix+`_events SET at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "new")
	storetest.WaitFor(t, "the old event to go", func() bool {
		// A replay that the eviction overtakes reports the gap: it is
		// the eviction happening, so look again.
		b, err := s.Replay(context.Background(), store.Earliest)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for e, err := range b.Events {
			if errors.Is(err, store.ErrHistoryGap) {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e.ID)
		}
		return len(got) == 1 && got[0] == "new"
	})
}
