package boltstore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/boltstore"
	"github.com/mercurekit/mercure/storetest"
)

// Options refuse values they cannot honour rather than clamp them, and
// Open creates no file then.
func TestOpen_RejectsBadOptions(t *testing.T) {
	t.Parallel()
	cases := map[string]boltstore.Option{
		"negative max events":   boltstore.WithMaxEvents(-1),
		"negative max age":      boltstore.WithMaxAge(-time.Second),
		"nil clock":             boltstore.WithClock(nil),
		"negative lock timeout": boltstore.WithLockTimeout(-time.Second),
		"negative retry window": boltstore.WithRetryWindow(-time.Second),
		"nil option":            nil,
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := boltstore.Open(filepath.Join(storetest.TempDir(t), "hub.db"), o)
			if !errors.Is(err, mercure.ErrInvalidOption) {
				t.Fatalf("Open: store %v, err %v; want ErrInvalidOption", s, err)
			}
		})
	}
}
