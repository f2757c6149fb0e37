package main

import (
	"strings"
	"testing"
	"time"
)

// A failover without -durable may lose acknowledged updates: counted,
// not failed on; with -durable, or in an outage, a loss fails the run,
// as does an update stored twice or an event publishing never came
// back from.
func TestFailures(t *testing.T) {
	stats := []eventStats{{event: event{name: "warm-up"}}, {event: event{name: "primary-kill", store: true}, recovered: time.Second, lost: 2}}
	r := report{kind: kindRedisSentinel, lost: []string{"A1", "B1"}, stats: stats, rssBound: 1}
	if f := r.failures(); len(f) != 0 {
		t.Errorf("asynchronous failover: %q", f)
	}
	r.durable = true
	if f := r.failures(); len(f) != 1 || !strings.Contains(f[0], "2 acknowledged updates lost (A1 B1)") {
		t.Errorf("-durable: %q", f)
	}
	r = report{kind: kindPostgres, lost: []string{"A1"}, duplicated: []string{"B2"}, stats: stats, rssBound: 1}
	if f := r.failures(); len(f) != 2 {
		t.Errorf("outage: %q", f)
	}
	r = report{kind: kindPostgresStandby, stats: []eventStats{stats[0], {event: event{name: "primary-kill"}, recovered: -1}}, rssBound: 1}
	if f := r.failures(); len(f) != 1 || !strings.Contains(f[0], "primary-kill") {
		t.Errorf("no recovery: %q", f)
	}
}

// A lag must lose what the primary acknowledged meanwhile, or, with
// -durable, have no publish sent during it acknowledged before the
// primary's kill: otherwise the replica did not lag.
func TestLagFailures(t *testing.T) {
	lag := eventStats{event: event{name: "lag", at: at(40), span: time.Second}, recovered: 0}
	kill := eventStats{event: event{name: "primary-kill", at: at(41), store: true}, recovered: time.Second, lost: 90}
	stats := []eventStats{{event: event{name: "warm-up", at: at(0)}}, lag, kill}
	r := report{kind: kindRedisCluster, lag: time.Second, lost: []string{"A1"}, stats: stats, rssBound: 1}
	if f := r.failures(); len(f) != 0 {
		t.Errorf("asynchronous, lost: %q", f)
	}
	r.lost = nil
	if f := r.failures(); len(f) != 1 || !strings.Contains(f[0], "lost no acknowledged update") {
		t.Errorf("asynchronous, nothing lost: %q", f)
	}
	r.durable = true
	if f := r.failures(); len(f) != 1 || !strings.Contains(f[0], "acknowledged 0.00s into it, before the primary-kill") {
		t.Errorf("-durable, acknowledged during the lag: %q", f)
	}
	stats[1].recovered = 1500 * time.Millisecond
	if f := r.failures(); len(f) != 0 {
		t.Errorf("-durable, acknowledged after the kill: %q", f)
	}
	r.lag = 0
	r.durable = false
	if f := r.failures(); len(f) != 0 {
		t.Errorf("no lag: %q", f)
	}
}

// The result line holds the totals and each event's figures, prefixed
// with its name.
func TestLine(t *testing.T) {
	r := report{kind: kindRedisCluster, durable: true, lag: time.Second, acked: 10, elapsed: time.Minute, rssBound: 1,
		stats: []eventStats{{event: event{name: "warm-up"}, acked: 4}, {event: event{name: "primary-kill"}, recovered: 2340 * time.Millisecond, refused: 7, acked: 6}}}
	l := r.line()
	for _, want := range []string{"result store=redis-cluster durable=true lag=1s ", " acked=10 ", " warm-up.acked=4 ",
		" primary-kill.recover=2.34 primary-kill.refused=7 primary-kill.acked=6 primary-kill.lost=0 ", " ok=true"} {
		if !strings.Contains(l, want) {
			t.Errorf("line %q lacks %q", l, want)
		}
	}
}
