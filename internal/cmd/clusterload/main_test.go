package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/internal/seqcheck"
)

// The run's reader reads blocks as an EventSource does: the position
// block (an id without data) is a cursor, not an event; comments and
// retry lines are skipped. Its records, checked against the order, find
// a skipped event.
func TestReadStreamAndCheck(t *testing.T) {
	stream := ": hello\n\nid: p\n\nretry: 1000\n\nid: A0\ndata: x\n\nid: B0\ndata: y\ndata: z\n\nid: A2\ndata: w\n\n"
	var got []string
	var conn seqcheck.Conn
	readStream(strings.NewReader(stream), func(id string, data bool) {
		got = append(got, id+map[bool]string{true: "+data", false: ""}[data])
		if data {
			conn.IDs = append(conn.IDs, id)
		} else {
			conn.Cursor = id
		}
	})
	if want := []string{"p", "A0+data", "B0+data", "A2+data"}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	o := seqcheck.NewOrder(strings.Fields("x p A0 B0 A1 A2"), nil)
	if r := seqcheck.Check(o, []seqcheck.Conn{conn}, "A2"); r.LostSilently != 1 || r.Delivered != 3 || r.OK() {
		t.Fatalf("A1 skipped: %+v", r)
	}
}

// -durable and -lag need replicas and the store's event; -lag is not
// negative; a cluster has two hubs, three with embedded NATS nodes, whose
// store's event is a hub's kill.
func TestValidate(t *testing.T) {
	cfg := func(kind, events string, hubs int) config {
		return config{kind: kind, hubs: hubs, events: parseEvents(events, kind)}
	}
	durable := func(c config) config { c.durable = true; return c }
	lag := func(c config, d time.Duration) config { c.lag = d; return c }
	for _, c := range []struct {
		cfg config
		ok  bool
	}{
		{cfg(kindRedis, "", 2), true},
		{lag(durable(cfg(kindPostgresStandby, "", 2)), time.Second), true},
		{lag(cfg(kindRedisCluster, "", 2), time.Second), true},
		{durable(cfg(kindPostgres, "", 2)), false},
		{lag(cfg(kindRedis, "", 2), time.Second), false},
		{lag(cfg(kindRedisSentinel, "", 2), -time.Second), false},
		{durable(cfg(kindRedisSentinel, "hub-kill", 3)), false},
		{cfg(kindNATS, "none", 3), true},
		{cfg(kindNATS, "hub-stop,store,hub-kill", 3), true},
		{cfg(kindNATS, "store,store", 3), false},
		{cfg(kindNATS, "crash", 3), false},
		{cfg(kindNATSEmbed, "", 3), true},
		{cfg(kindNATSEmbed, "", 2), false},
		{cfg(kindNATSEmbed, "store", 3), false},
		{cfg(kindRedis, "", 1), false},
	} {
		if err := c.cfg.validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}

// The events by default: the store's own, or a hub's kill for hubs that
// are their own store.
func TestParseEvents(t *testing.T) {
	for _, c := range []struct {
		spec, kind string
		want       []string
	}{
		{"", kindRedis, []string{eventHubStop, eventStore}},
		{"", kindNATSEmbed, []string{eventHubStop, eventHubKill}},
		{"none", kindNATS, nil},
		{"hub-kill", kindPostgres, []string{eventHubKill}},
	} {
		if got := parseEvents(c.spec, c.kind); !slices.Equal(got, c.want) {
			t.Errorf("-events %q, -store %s: %q, want %q", c.spec, c.kind, got, c.want)
		}
	}
}

// A killed hub's clients go to the next hub alive.
func TestPick(t *testing.T) {
	hubs := []*hub{{name: "A"}, {name: "B"}, {name: "C"}}
	hubs[2].dead.Store(true)
	if got := pick(hubs, 2); got != hubs[0] {
		t.Errorf("C dead: %s, want A", got.name)
	}
	if got := pick(hubs, 1); got != hubs[1] {
		t.Errorf("B alive: %s, want B", got.name)
	}
}
