package redistest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure/storetest"
)

// What the topologies of [StartSentinel] and [StartCluster] need of each
// of their servers: its replication, asked and held back.

// quick bounds each call the harness makes to a server it polls: a
// killed server refuses at once, a paused one must not hold the poll.
const quick = 2 * time.Second

// poll returns the harness's client of the server and a context for one
// call of a poll, bounded by quick. The client does not retry: the poll
// does.
func (s *Server) poll() (*redis.Client, context.Context, context.CancelFunc) {
	if s.poller == nil {
		s.poller = redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		rdb := s.poller
		s.t.Cleanup(func() { rdb.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), quick)
	return s.poller, ctx, cancel
}

// info returns the fields of one section of the server's INFO.
func (s *Server) info(section string) (map[string]string, error) {
	rdb, ctx, cancel := s.poll()
	defer cancel()
	text, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	return infoFields(text), nil
}

// infoFields returns the fields of a reply of INFO or CLUSTER INFO:
// lines of name:value.
func infoFields(text string) map[string]string {
	fields := map[string]string{}
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// running reports whether the server's process runs and answers: not
// killed, not paused.
func (s *Server) running() bool { return s.cmd != nil && !s.paused }

// linkDown reports whether the server is a replica that has lost its
// link to its primary.
func (s *Server) linkDown() bool {
	f, err := s.info("replication")
	return err == nil && f["role"] == "slave" && f["master_link_status"] == "down"
}

// Stall makes a replica hold its primary's writes without applying
// them, until release: they wait, read but unapplied, in its input
// buffer (CLIENT PAUSE WRITE pauses the replication link too). Meanwhile
// the replica acknowledges none of them (WAIT does not count it), and if
// its primary dies first ([Sentinel.KillPrimary], [Cluster.KillPrimaryFor]
// return once the replicas have seen it die) the replica drops them with
// the link: promoted, it lacks writes that the old primary acknowledged,
// as asynchronous replication allows. release lets it go on; it is
// called when the test ends if not before, and does nothing once the
// server is killed.
//
// The replica answers INFO and PING meanwhile, so that a failover may
// still promote it, but not the PUBLISH of a sentinel's hello messages,
// nor what the sentinel sends after one on that link: a sentinel takes a
// replica stalled for two seconds for down (s_down) until it is released
// and answers again. Release it soon after the primary's death: a
// sentinel picks the replica it promotes a second or more later, among
// those that answer. A cluster's replica decides its own promotion on
// the cluster bus, which the stall does not hold. (See [Sentinel.Prefer] for
// which one it picks.) A paused process (SIGSTOP, [Server.Pause]) or
// DEBUG SLEEP ([Server.Busy]) would lose nothing: the writes wait in the
// kernel's socket buffer, and the replica applies them once it runs again,
// before it reads the end of the link. Stall needs Redis 6.2 or later.
func (s *Server) Stall() (release func()) {
	s.t.Helper()
	rdb := s.Client()
	// Paused for longer than a test lasts: release ends it.
	pause := fmt.Sprint((10 * time.Minute).Milliseconds())
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", pause, "WRITE").Err(); err != nil {
		s.t.Fatalf("CLIENT PAUSE on %s: %v", s.Addr, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if s.cmd == nil {
				return // killed: the pause went with the process
			}
			if err := rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
				s.t.Errorf("CLIENT UNPAUSE on %s: %v", s.Addr, err)
			}
		})
	}
	s.t.Cleanup(release) // before the client's Close, registered earlier
	return release
}

// waitLinksDown waits until each of replicas that runs has seen its link
// to the primary go down: a write its primary held back is then lost to
// it, even once released from [Server.Stall].
func waitLinksDown(t *testing.T, replicas []*Server) {
	t.Helper()
	for _, r := range replicas {
		if r.running() {
			storetest.WaitFor(t, "replica "+r.Addr+" to see its primary die", r.linkDown)
		}
	}
}

// online counts the replicas that the server, a primary, lists as online
// in its INFO.
func (s *Server) online() int {
	f, err := s.info("replication")
	if err != nil || f["role"] != "master" {
		return 0
	}
	n := 0
	for k, v := range f {
		if strings.HasPrefix(k, "slave") && strings.Contains(v, "state=online") {
			n++
		}
	}
	return n
}
