package memstore_test

import (
	"testing"

	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newMemoryStore(t, 100000) })
}

func TestRetention(t *testing.T) {
	storetest.RunRetention(t, func(t *testing.T, keep int) store.Store { return newMemoryStore(t, keep) })
}

func TestEndStreams(t *testing.T) {
	storetest.RunEndStreams(t, func(t *testing.T) (a, b store.Store) {
		s := newMemoryStore(t, 1000)
		return s, s
	})
}

func TestCluster(t *testing.T) {
	s := newMemoryStore(t, 100000)
	storetest.RunCluster(t, func(t *testing.T) store.Store { return s })
}
