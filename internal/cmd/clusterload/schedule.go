package main

import (
	"log"
	"time"
)

// schedule does to the run what its flags say, and records it.
type schedule struct {
	cfg    config
	st     *storeSet
	hubs   []*hub
	rss    *sampler
	base   int64   // hub B's RSS before its pause; 0 without one
	events []event // what was done, in order, the warm-up first
}

// run runs the traffic's warm-up, then each of -events, -between apart,
// then -after of traffic, from the traffic's start.
func (s *schedule) run(started time.Time) {
	s.events = []event{{name: "warm-up", at: started}}
	time.Sleep(s.cfg.warm)
	for i, name := range s.cfg.events {
		if i > 0 {
			time.Sleep(s.cfg.between)
		}
		switch name {
		case eventHubStop:
			s.stopHub()
		case eventStore:
			s.storeEvent()
		case eventHubKill:
			s.killHub()
		}
	}
	time.Sleep(s.cfg.after)
}

// storeEvent does to the store's servers what its kind lives through: the
// outage kinds' server, or NATS's stream leader, killed and restarted;
// the failover kinds' replica killed and restarted, then their primary
// killed.
func (s *schedule) storeEvent() {
	switch {
	case s.st.leader != nil:
		s.restart("leader-kill", s.st.leader(), s.cfg.down)
	case s.st.replica == nil:
		s.restart("store-kill", s.st.primary, s.cfg.down)
	default:
		s.restart("replica-kill", s.st.replica, s.cfg.replicaDown)
		time.Sleep(s.cfg.between)
		waitAll("the replicas to follow the primary", 60*time.Second, s.st.synced)
		s.failover(s.lag())
	}
}

// stopHub stops hub B (SIGSTOP) for -pause and continues it; the other
// hubs keep publishing, so that B's own publishes measure its stall.
func (s *schedule) stopHub() {
	b := s.hubs[1]
	s.base = s.rss.now()
	log.Printf("SIGSTOP hub B (RSS %d MiB) for %v", s.base>>20, s.cfg.pause)
	check(stop(b.cmd.Process))
	s.add(event{name: "hub-stop", span: s.cfg.pause, hub: b.name})
	time.Sleep(s.cfg.pause)
	check(continueProcess(b.cmd.Process))
	log.Printf("SIGCONT hub B")
}

// killHub kills the last hub as a crash would (SIGKILL: an embedded NATS
// node dies with it); its subscribers and publishers go to the other
// hubs. With -hub-down, it starts it again that much later, on the same
// flags (an embedded node on its directory, to catch up), and its
// publisher comes back to it once it listens.
func (s *schedule) killHub() {
	h := s.hubs[len(s.hubs)-1]
	log.Printf("SIGKILL hub %s", h.name)
	h.dead.Store(true)
	h.kill()
	e := s.add(event{name: "hub-kill", span: s.cfg.hubDown, store: s.st.hubArgs != nil})
	if s.cfg.hubDown <= 0 {
		return
	}
	time.Sleep(time.Until(e.at.Add(s.cfg.hubDown)))
	restarted := s.add(event{name: "hub-restart", hub: h.name})
	h.start()
	h.waitListening()
	h.dead.Store(false)
	log.Printf("hub %s restarted, listening %.2fs later", h.name, time.Since(restarted.at).Seconds())
}

// restart kills srv as a crash would, and starts it again after down.
func (s *schedule) restart(name string, srv *server, down time.Duration) {
	log.Printf("killing %s for %v", srv.name, down)
	srv.kill()
	s.add(event{name: name, span: down, store: true})
	time.Sleep(down)
	srv.start()
	log.Printf("%s restarted", srv.name)
}

// lag makes the replica that will take over stop receiving the
// primary's writes for -lag, so that the failover that follows loses what
// the primary acknowledged meanwhile, and returns the release that the
// failover calls (nil without -lag). It is no store event: it loses
// nothing by itself, the primary's kill does.
func (s *schedule) lag() (release func()) {
	if s.cfg.lag <= 0 {
		return nil
	}
	release = s.st.lag()
	s.add(event{name: "lag", span: s.cfg.lag})
	log.Printf("the replica that will take over lags for %v", s.cfg.lag)
	time.Sleep(s.cfg.lag)
	return release
}

// failover kills the primary as a crash would, and promotes its replica
// -promote-after later where the store does not do it itself
// (PostgreSQL: failover tooling, as Patroni, would). Where the store
// lets it (Redis), it starts the old primary again -primary-down later,
// as a replica: with -durable, a Cluster's shard has no other replica to
// acknowledge appends.
//
// release, if not nil, ends the lag: it is called once the primary was
// sent its crash, before the wait for its end.
func (s *schedule) failover(release func()) {
	log.Printf("killing the primary (%s)", s.st.primary.name)
	s.st.primary.signalCrash()
	if release != nil {
		release()
		log.Printf("the lag ended")
	}
	s.st.primary.reap()
	e := event{name: "primary-kill", store: true}
	rejoin := s.st.rejoin != nil && s.cfg.primaryDown > 0
	if rejoin {
		e.span = s.cfg.primaryDown
	}
	e = s.add(e)
	if s.st.promote != nil {
		time.Sleep(s.cfg.promoteAfter)
		s.st.promote()
	}
	if rejoin {
		time.Sleep(time.Until(e.at.Add(s.cfg.primaryDown)))
		s.st.rejoin()
		log.Printf("the old primary (%s) restarted as a replica", s.st.primary.name)
	}
}

// add records e as done now, and returns it.
func (s *schedule) add(e event) event {
	e.at = time.Now()
	s.events = append(s.events, e)
	return e
}
