package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/mercurekit/mercure/storetest"
)

// A store opened without options keeps a bounded history: any client may
// ask to replay all of it.
func TestDefaultRetentionIsBounded(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(storetest.TempDir(t), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.cfg.maxEvents != DefaultMaxEvents || DefaultMaxEvents <= 0 {
		t.Fatalf("default retention %d events", s.cfg.maxEvents)
	}
}

// An "ids" value of a file written before the latest occurrence was
// recorded (16 bytes) still locates the oldest; its latest is known only
// when the id has a single occurrence.
func TestIDRefReadsOlderValues(t *testing.T) {
	t.Parallel()
	old := func(oldest, n uint64) []byte { return idVal(oldest, n, 0)[:16] }
	for _, c := range []struct {
		v                 []byte
		oldest, n, latest uint64
	}{
		{idVal(3, 2, 9), 3, 2, 9},
		{old(3, 1), 3, 1, 3},
		{old(3, 2), 3, 2, 0},
		{nil, 0, 0, 0},
	} {
		if o, n, l := idRef(c.v); o != c.oldest || n != c.n || l != c.latest {
			t.Errorf("idRef(%x) = %d, %d, %d; want %d, %d, %d", c.v, o, n, l, c.oldest, c.n, c.latest)
		}
	}
}
