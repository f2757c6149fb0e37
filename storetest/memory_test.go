package storetest

import (
	"testing"

	"github.com/mercurekit/mercure"
)

func TestMemoryStore(t *testing.T) {
	Run(t, func(t *testing.T) mercure.Store { return memoryStore(t, 100000) })
}

func TestMemoryStoreRetention(t *testing.T) {
	RunRetention(t, func(t *testing.T, keep int) mercure.Store { return memoryStore(t, keep) })
}

func memoryStore(t *testing.T, size int) *mercure.MemoryStore {
	t.Helper()
	s, err := mercure.NewMemoryStore(size)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMemoryStoreEndStreams(t *testing.T) {
	RunEndStreams(t, func(t *testing.T) (a, b mercure.Store) {
		s := memoryStore(t, 1000)
		return s, s
	})
}

func TestMemoryStoreCluster(t *testing.T) {
	s := memoryStore(t, 100000)
	RunCluster(t, func(t *testing.T) mercure.Store { return s })
}
