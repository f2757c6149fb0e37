package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore/pgtest"
	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/storetest"
)

// -store redis-sentinel://... shares the history between hubs through
// the primary that the sentinels name, and follows it through a
// failover: with replicas=1 the update acknowledged before the primary's
// death is still replayed after it. Two replicas: once one has taken
// over, the other must have each update before the hubs acknowledge it.
func TestStandalone_RedisSentinelStore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: a failover takes seconds")
	}
	s := redistest.StartSentinel(t, 2)
	spec := "redis-sentinel://" + strings.Join(s.Addrs, ",") + "/0?master=" + s.MasterName + "&replicas=1"
	a, b := twoHubs(t, spec)
	testFailover(t, a, b, func() func() {
		old := s.KillPrimary()
		return func() { s.WaitFailover(old) }
	})
}

// -store redis-cluster://... shares the history between hubs on a
// cluster, in the slot of the default stream key {mercure}, and follows
// the slot's primary through a failover. The replica that takes over is
// the slot's only one: with replicas=1 the hubs acknowledge updates again
// once the old primary, restarted, has become its replica.
func TestStandalone_RedisClusterStore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: a failover takes seconds")
	}
	c := redistest.StartCluster(t)
	spec := "redis-cluster://" + strings.Join(c.Addrs, ",") + "?replicas=1"
	a, b := twoHubs(t, spec)
	testFailover(t, a, b, func() func() {
		old := c.KillPrimaryFor("{mercure}")
		return func() {
			c.WaitFailover("{mercure}", old)
			old.Start()
		}
	})
	if n, err := c.Client().Exists(context.Background(), "{mercure}").Result(); err != nil || n != 1 {
		t.Errorf("the stream {mercure}: %d %v, want it there", n, err)
	}

	// A stream key without a hash tag would spread the store's keys over
	// several slots: refused.
	_, err := configure([]string{"-addr", "127.0.0.1:0", "-store", spec + "&stream=mercure"}, slog.New(slog.DiscardHandler))
	if !errors.Is(err, mercure.ErrInvalidOption) || !strings.Contains(err.Error(), "-store") {
		t.Fatalf("a cluster stream key without a hash tag: %v, want ErrInvalidOption naming -store", err)
	}
}

// twoHubs configures two hubs with -store spec, serves them, and returns
// their hub URLs; everything is shut down when the test ends.
func twoHubs(t *testing.T, spec string) (a, b string) {
	t.Helper()
	var urls [2]string
	for i := range urls {
		s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-store", spec}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s.handler)
		t.Cleanup(func() {
			srv.Close()
			if err := s.hub.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
			if err := s.closeStore(); err != nil {
				t.Error(err)
			}
		})
		urls[i] = srv.URL + "/.well-known/mercure"
	}
	return urls[0], urls[1]
}

// testFailover publishes on hub a to a subscriber of hub b, kills the
// primary (kill returns what to do once it is dead: wait for the
// failover, at least), publishes again until a accepts, and checks that
// b replays both updates.
func testFailover(t *testing.T, a, b string, kill func() (then func())) {
	t.Helper()
	publish := func() int {
		res, err := http.PostForm(a, url.Values{"topic": {"x"}, "data": {"after"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	lines := subscribe(t, b+"?match=x")
	res, err := http.PostForm(a, url.Values{"topic": {"x"}, "data": {"hello"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("publish: %d", res.StatusCode)
	}
	want(t, lines, "data: hello")

	then := kill()
	killed := time.Now()
	then()
	// The hub answers 503 while the store cannot reach a primary, or
	// while fewer replicas than replicas=N have the update.
	var code int
	if !storetest.Within(storetest.Deadline, func() bool { code = publish(); return code == http.StatusOK }) {
		t.Fatalf("publish after the primary's death: %d until the deadline", code)
	}
	t.Logf("first publish accepted %.1f s after the primary's kill", time.Since(killed).Seconds())

	lines = subscribe(t, b+"?match=x&last_event_id=earliest")
	want(t, lines, "data: hello")
	want(t, lines, "data: after")
}

// Bad Redis URLs are refused before any connection, saying why and
// naming the flag, without their passwords.
func TestStandalone_BadRedisURL(t *testing.T) {
	t.Parallel()
	for spec, why := range map[string]string{
		"redis-sentinel://127.0.0.1:1/0":                                "no master",
		"redis-sentinel://u:secret@127.0.0.1:1/0?password=secret":       "no master",
		"redis-sentinel:///0?master=m":                                  "no address",
		"redis-sentinel://127.0.0.1/0?master=m":                         `address "127.0.0.1": want HOST:PORT`,
		"redis-sentinel://127.0.0.1:1/0?master=m&master_name=n":         "want one name",
		"redis-sentinel://127.0.0.1:1/0?master=m&replicas=1.5":          "replicas=",
		"redis-sentinel://127.0.0.1:1/0?master=m&route_by_latency=true": "the store needs the primary",
		"redis-sentinel://127.0.0.1:1/0?master=m&replica_only=true":     "the store needs the primary",
		"redis-sentinel://127.0.0.1:1/x?master=m":                       "invalid database number",
		"redis-cluster://":                                                  "no address",
		"redis-cluster://127.0.0.1:1,,127.0.0.1:2":                          `address "": want HOST:PORT`,
		"redis-cluster://127.0.0.1:1?replicas=-1":                           "replicas=",
		"redis-cluster://127.0.0.1:1/3":                                     "a Redis Cluster has only database 0",
		"redis-cluster://127.0.0.1:1?bogus=1":                               "bogus",
		"redis://127.0.0.1:1,127.0.0.1:2/0":                                 "takes one address",
		"redis://127.0.0.1:1/0?replicas=x":                                  "replicas=",
		"rediss-cluster://u:secret@127.0.0.1:1?password=secret&replicas=-1": "replicas=",
	} {
		_, err := configure([]string{"-addr", "127.0.0.1:0", "-store", spec}, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), why) || !strings.HasPrefix(err.Error(), "-store") {
			t.Errorf("-store %s: %v, want an error of -store saying %q", spec, err, why)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("-store %s: %v shows a password", spec, err)
		}
	}
	// Nothing listens on port 1: the hub fails at start-up, not at its
	// first publish.
	for _, spec := range []string{"redis-sentinel://127.0.0.1:1,127.0.0.1:2/0?master=m", "redis-cluster://127.0.0.1:1,127.0.0.1:2"} {
		if _, err := configure([]string{"-addr", "127.0.0.1:0", "-store", spec}, slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("-store %s: unreachable, accepted", spec)
		}
	}
}

// The Redis URLs of -store reach go-redis's parsers as they expect them:
// the first address as the host, the others in addr parameters, the
// master's name in master_name; IPv6 addresses too.
func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]redisURL{
		"redis://localhost/0":                        {stream: "mercure", goRedis: "redis://localhost/0"},
		"rediss://u:p@h:1/2?stream=s&dial_timeout=3": {stream: "s", goRedis: "rediss://u:p@h:1/2?dial_timeout=3"},
		"redis-sentinel://u:p@h:1,[::1]:2/0?master=m&replicas=2&password=q": {kind: "sentinel", stream: "mercure", replicas: 2,
			goRedis: "redis://u:p@h:1/0?addr=%5B%3A%3A1%5D%3A2&master_name=m&password=q"},
		"redis-cluster://h:1,h:2,h:3?replicas=1": {kind: "cluster", stream: "{mercure}", replicas: 1,
			goRedis: "redis://h:1?addr=h%3A2&addr=h%3A3"},
		"rediss-cluster://h:1/0?stream={s}": {kind: "cluster", stream: "{s}", goRedis: "rediss://h:1"},
	} {
		got, err := parseRedisURL(spec)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		got.shown = ""
		if got != want {
			t.Errorf("%s: %+v, want %+v", spec, got, want)
		}
	}
	if r, _ := parseRedisURL("redis-sentinel://u:p@h:1/0?master=m&password=q"); strings.Contains(r.shown, "p@") || strings.Contains(r.shown, "=q") {
		t.Errorf("shown as %s: passwords in it", r.shown)
	}
}

// -store postgres://… with several hosts (pgx's multi-host form) follows
// the primary: a synchronous standby promoted after the primary's death
// holds the update acknowledged before it, and the hubs publish again on
// their own.
func TestStandalone_PostgresStandby(t *testing.T) {
	t.Parallel()
	p := pgtest.Start(t)
	sb := p.StartStandby(t, true)
	a, b := twoHubs(t, pgtest.MultiHostDSN(p, sb))
	testFailover(t, a, b, func() func() {
		p.Kill()
		return sb.Promote
	})
}
