package redistest_test

import (
	"testing"

	"github.com/mercurekit/mercure/redisstore/redistest"
)

// Slot follows the cluster specification: CRC16 (XMODEM) of the key, or
// of its hash tag, modulo 16384. TestCluster_Failover checks it against
// a cluster's CLUSTER KEYSLOT.
func TestSlot(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]int{
		"123456789":           0x31C3, // the specification's check value
		"{123456789}.ids":     0x31C3,
		"x{123456789}y{z}":    0x31C3,
		"{}123456789":         redistest.Slot("{}123456789"),
		"foo":                 12182,
		"{user1000}.follows":  redistest.Slot("user1000"),
		"{mercure}:subs:name": redistest.Slot("mercure"),
	} {
		if got := redistest.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if redistest.Slot("{}123456789") == redistest.Slot("123456789") {
		t.Error("an empty hash tag counts: the whole key is hashed")
	}
}
