package boltstore

import (
	"path/filepath"
	"testing"
)

// A store opened without options keeps a bounded history: any client may
// ask to replay all of it.
func TestDefaultRetentionIsBounded(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.cfg.maxEvents != DefaultMaxEvents || DefaultMaxEvents <= 0 {
		t.Fatalf("default retention %d events", s.cfg.maxEvents)
	}
}
