package storetest

import (
	"testing"

	"github.com/mercurekit/mercure"
)

func TestMemoryStore(t *testing.T) {
	Run(t, func(*testing.T) mercure.Store { return mercure.NewMemoryStore(100000) })
}
