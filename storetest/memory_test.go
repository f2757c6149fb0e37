package storetest

import (
	"testing"

	"github.com/mercurekit/mercure"
)

func TestMemoryStore(t *testing.T) {
	Run(t, func(*testing.T) mercure.Store { return mercure.NewMemoryStore(100000) })
}

func TestMemoryStoreRetention(t *testing.T) {
	RunRetention(t, func(_ *testing.T, keep int) mercure.Store { return mercure.NewMemoryStore(keep) })
}
