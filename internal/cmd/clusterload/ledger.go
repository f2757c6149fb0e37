package main

import (
	"sync"
	"time"
)

// attempt is one POST of an update to a hub.
type attempt struct {
	hub        string
	sent, done time.Time
	ok         bool // the hub acknowledged it (200)
}

// ledger records every publish attempt and when each update was
// acknowledged: the events' recovery times come from the attempts, and
// the updates a failover lost from the acknowledgements. It is safe for
// concurrent use.
type ledger struct {
	mu       sync.Mutex
	attempts []attempt
	acked    map[string]time.Time // update id → when a hub acknowledged it
}

// publish sends the update id, first sent at first, to h once (see
// publish) and records the attempt; true once h acknowledged it.
func (l *ledger) publish(h *hub, id string, first time.Time) bool {
	sent := time.Now()
	ok := publish(h, id, first)
	l.record(id, attempt{hub: h.name, sent: sent, done: time.Now(), ok: ok})
	return ok
}

// record adds a of the update id.
func (l *ledger) record(id string, a attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, a)
	if a.ok {
		if l.acked == nil {
			l.acked = map[string]time.Time{}
		}
		l.acked[id] = a.done
	}
}

// counts returns the updates acknowledged and the attempts refused (or
// timed out) so far.
func (l *ledger) counts() (acked, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), len(l.attempts) - len(l.acked)
}

// snapshot returns copies of the attempts and acknowledgements.
func (l *ledger) snapshot() ([]attempt, map[string]time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	acked := make(map[string]time.Time, len(l.acked))
	for id, t := range l.acked {
		acked[id] = t
	}
	return append([]attempt(nil), l.attempts...), acked
}

// event is something the schedule did to the run.
type event struct {
	// name says what: warm-up (the traffic before the first event),
	// hub-stop, hub-kill, hub-restart, replica-kill, lag (a replica
	// that stops receiving the primary's writes, -lag), primary-kill,
	// store-kill or leader-kill (NATS: the stream leader's server).
	name string
	at   time.Time
	// span is how long it lasted: hub B's pause, a server's time down;
	// 0 for a server that stays down.
	span time.Duration
	// hub is the hub whose publishes measure the recovery ("" for
	// any): for hub B's stop, the other hubs keep publishing; for a
	// killed hub's restart, its own publisher comes back to it.
	hub string
	// store says that it hit the store's servers (with an embedded NATS
	// node, a hub's kill does): it may lose updates acknowledged before
	// it.
	store bool
}

// eventStats is what an event cost, measured over its window: from it
// to the next event, or to the end of the traffic.
type eventStats struct {
	event
	// recovered is the time from the event to the acknowledgement of
	// the first publish sent after it (to hub, when set); -1 if none
	// was acknowledged.
	recovered time.Duration
	// refused counts the attempts (to hub, when set) refused or timed
	// out between the event and the recovery.
	refused int
	// acked counts the updates acknowledged in the window.
	acked int
	// lost counts the updates acknowledged before the event, after the
	// store event before it, and missing from the store's history: a
	// store event is what loses updates acknowledged before it.
	lost int
	// duplicated counts the updates acknowledged in the window that the
	// store's history holds more than once.
	duplicated int
	// gaps counts the resumes opened in the window that a hub answered
	// with another cursor than the one asked for.
	gaps int
	// p99 is the 99th percentile of the latencies of the deliveries of
	// the updates first sent in the window (see latencies).
	p99 time.Duration
}

// analyze measures each event of events (in time order, the warm-up
// first) from the attempts, the acknowledgements, the store's history
// (stored: ids in order, as a hub replays them) and the times of the
// resumes answered with a gap. It also returns the ids acknowledged but
// not stored, and those stored more than once.
func analyze(events []event, attempts []attempt, acked map[string]time.Time, stored []string, gaps []time.Time) (stats []eventStats, lost, duplicated []string) {
	stats = make([]eventStats, len(events))
	for i, e := range events {
		rec, refused := recovery(e, attempts)
		stats[i] = eventStats{event: e, recovered: rec, refused: refused}
	}
	count := map[string]int{}
	for _, id := range stored {
		count[id]++
	}
	for id, t := range acked {
		stats[window(events, t)].acked++
		switch {
		case count[id] == 0:
			lost = append(lost, id)
			stats[loser(events, t)].lost++
		case count[id] > 1:
			duplicated = append(duplicated, id)
			stats[window(events, t)].duplicated++
		}
	}
	for _, t := range gaps {
		stats[window(events, t)].gaps++
	}
	return stats, lost, duplicated
}

// recovery returns the time from e to the acknowledgement of the first
// publish sent after e (to e.hub, when set), -1 if none was, and the
// attempts refused meanwhile. A hub that answered an attempt sent before
// e does not count: it may have recorded the update before e.
func recovery(e event, attempts []attempt) (time.Duration, int) {
	var first time.Time
	for _, a := range attempts {
		if a.ok && !a.sent.Before(e.at) && (e.hub == "" || a.hub == e.hub) && (first.IsZero() || a.done.Before(first)) {
			first = a.done
		}
	}
	refused := 0
	for _, a := range attempts {
		if !a.ok && !a.done.Before(e.at) && (first.IsZero() || !a.done.After(first)) && (e.hub == "" || a.hub == e.hub) {
			refused++
		}
	}
	if first.IsZero() {
		return -1, refused
	}
	return first.Sub(e.at), refused
}

// window returns the index of the event whose window holds t: the last
// one at or before t (the first, the warm-up, for earlier times).
func window(events []event, t time.Time) int {
	i := 0
	for j, e := range events {
		if !e.at.After(t) {
			i = j
		}
	}
	return i
}

// loser returns the index of the event that lost an update acknowledged
// at t: the first store event after t; the event of t's window if none.
func loser(events []event, t time.Time) int {
	for j, e := range events {
		if e.store && e.at.After(t) {
			return j
		}
	}
	return window(events, t)
}
