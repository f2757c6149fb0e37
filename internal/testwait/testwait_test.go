package testwait_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/testwait"
)

func TestWithin_WaitsForTheCondition(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 5 {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	if !testwait.Within(testwait.Deadline, func() bool { return n.Load() == 5 }) {
		t.Fatal("Within gave up before its deadline")
	}
}

func TestWithin_GivesUpAtItsDeadline(t *testing.T) {
	t.Parallel()
	calls := 0
	if testwait.Within(20*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("Within reported a condition that never held")
	}
	if calls < 2 {
		t.Fatalf("the condition was checked %d times, want it polled", calls)
	}
}

// The subtests of AtOnce run side by side, before their parent test
// returns: each waits for the other to have started.
func TestAtOnce(t *testing.T) {
	t.Parallel()
	started := make(chan string, 2)
	both := func(t *testing.T) {
		started <- t.Name()
		if !testwait.Within(testwait.Deadline, func() bool { return len(started) == 2 }) {
			t.Fatal("the other subtest did not start beside this one")
		}
	}
	testwait.AtOnce(t, map[string]func(t *testing.T){"a": both, "b": both})
	if len(started) != 2 {
		t.Fatalf("%d subtests ran before AtOnce returned, want 2", len(started))
	}
}
