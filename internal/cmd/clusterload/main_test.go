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

// -durable and -lag need replicas; -lag is not negative.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		cfg config
		ok  bool
	}{
		{config{kind: kindRedis}, true},
		{config{kind: kindPostgresStandby, durable: true, lag: time.Second}, true},
		{config{kind: kindRedisCluster, lag: time.Second}, true},
		{config{kind: kindPostgres, durable: true}, false},
		{config{kind: kindRedis, lag: time.Second}, false},
		{config{kind: kindRedisSentinel, lag: -time.Second}, false},
	} {
		if err := c.cfg.validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}
