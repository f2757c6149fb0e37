//go:build unix

package mercure_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/alone"
	"github.com/mercurekit/mercure/internal/testwait"
)

// A stream cut before its first complete event still resumes exactly
// (issue 24 item 2: 12 of 20 readers kicked before their first event
// reconnected without a cursor and lost 13 to 16 updates each). The
// stream starts with its position, an id-only block that EventSource
// records as its last event id (spec §Reconnection, State
// Reconciliation, and Event Sourcing): a reader that got only that block,
// then stopped reading and was cut by the write timeout in the middle of
// its first event, resumes from it and gets every update published since
// it connected, in order, none twice. In both stream engines.
func TestREC_CutBeforeFirstEventResumesExactly(t *testing.T) {
	// It waits out a write timeout of 5 s: it starts first, in a process
	// of its own, rather than behind the package's parallel tests.
	if !alone.InProcess(t) {
		return
	}
	streamModesParallel(t, func(t *testing.T, opts ...mercure.Option) {
		// The write timeout applies to the resumed stream too, whose
		// reader must not be cut if it is descheduled for a while.
		th := newTestHub(t, append(opts, mercure.WithLimits(mercure.Limits{WriteTimeout: 5 * time.Second}),
			mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}), bigLimits)...)
		th.mustPost(form("topic", "x", "data", "before the stream")) // not for it
		rs := stalledStreams(t, th, "match=x", 1)[0]
		pos := rs.mustChunk(t)
		if !strings.HasPrefix(pos, "id: ") || strings.Contains(pos, "data:") {
			t.Fatalf("the stream starts with %q, want its position", pos)
		}
		position := strings.TrimSuffix(strings.TrimPrefix(pos, "id: "), "\n\n")
		// Large updates, which the reader never takes: it is cut while
		// the first one is still on its way.
		ids := publishUntilCut(t, th, "x", strings.Repeat("y", 256<<10), 0)
		ids = append(ids, th.mustPost(form("topic", "x", "data", "while away")))

		s := th.subscribe("match=x", "Last-Event-ID", position)
		if got := s.header("Mercure-Last-Event-ID"); got != position {
			t.Fatalf("Mercure-Last-Event-ID %q, want the position %q: the hub did not find it", got, position)
		}
		for i, want := range ids {
			if ev := s.next(t); ev.ID != want {
				t.Fatalf("resumed update %d: %q, want %q", i, ev.ID, want)
			}
		}
	})
}

// On a hub that has recorded nothing yet, the position a stream starts
// with is still a cursor that the hub finds: what is published after the
// stream was cut is replayed from it.
func TestREC_PositionOfAnEmptyHubResumes(t *testing.T) {
	th := newTestHub(t)
	s := th.subscribe("match=x")
	testwait.For(t, "the position", func() bool { return s.position.Load() != nil })
	position := *s.position.Load()
	s.close()
	id := th.mustPost(form("topic", "x", "data", "while away"))
	r := th.subscribe("match=x", "Last-Event-ID", position)
	if got := r.header("Mercure-Last-Event-ID"); got != position {
		t.Fatalf("Mercure-Last-Event-ID %q, want the position %q", got, position)
	}
	if ev := r.next(t); ev.ID != id {
		t.Fatalf("resumed with %q, want %q", ev.ID, id)
	}
}
