package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"

	"github.com/mercurekit/mercure/internal/testwait"
)

// OutageServer is what [RunOutage] needs of the server of a store on the
// network: stores on it, a link to it that a case cuts, and a crash and a
// restart when it can.
type OutageServer struct {
	// Open returns a store on the server, with connections of its own,
	// sharing one history with every store Open returned for this
	// server. It keeps at least keep events, and about that many (0: at
	// least a few thousand), and bounds each call to the server by
	// Timeout. With cut, it reaches the server through the link.
	Open func(t *testing.T, keep int, cut bool) store.Store
	// Cut closes every connection through the link and refuses new ones
	// until Mend.
	Cut  func()
	Mend func(t testing.TB)
	// LoseReply makes the link lose the server's reply to the next
	// request whose bytes hold marker, closing that connection instead;
	// the func it returns tells whether it has.
	LoseReply func(marker string) (lost func() bool)
	// Kill stops the server as a crash does; Restart starts it again
	// with every write it acknowledged. Both are nil when the server
	// cannot be restarted.
	Kill, Restart func(t *testing.T)
	// Timeout bounds each call of the stores to the server.
	Timeout time.Duration
}

// RunOutage runs the cases of a store on the network whose server fails:
// start returns a server for one case, one that can be killed and
// restarted when restartable is true (a case that needs it is skipped
// when Kill is nil). Stores that implement io.Closer are closed when the
// case ends.
//
// The cases:
//
//   - CrashAndRestart: while the server is down, Append and Replay fail
//     within a few Timeouts, the feed reports the outage (to a listener
//     added during it too) and its end; what was acknowledged survives,
//     and the feed resumes with what is appended after the restart.
//   - HubsAcrossARestart: two hubs; publishing fails fast during the
//     outage (ErrStore, HTTP 503), both hubs report it; a subscriber of
//     one gets every acknowledged update once, in order, without
//     reconnecting; an update sent again after the restart, to the other
//     hub or by POST, is answered with its id and recorded once.
//   - ResumeOnAnotherHub: a subscriber resumes on another hub with
//     Last-Event-ID and misses nothing, gets nothing twice; a hub started
//     on the history knows the last event id.
//   - Partition: a store cut off fails fast; once the link is back, its
//     feed passes every event appended meanwhile (more than a page), once,
//     in order, without reporting a gap.
//   - GapAfterRetention, GapFromEmptyHistory: events dropped by retention
//     while a store was cut off are reported as a gap before the next
//     event, even when the store had read none.
//   - LostReply: the reply to an append is lost; the update sent again is
//     recorded and delivered once.
//   - ClusterThroughARestart: two hubs under traffic, publishers sending
//     an update again until it is acknowledged, the server killed and
//     restarted: every acknowledged update is recorded once, and every
//     stream gets each once, in order, or ends and resumes from history
//     (see [RunCluster]).
//
// The cases run in parallel: start must give each restart case its own
// server, and the others their own keys on a shared one. With -short
// they skip: each waits seconds for an outage to be noticed and mended.
func RunOutage(t *testing.T, start func(t *testing.T, restartable bool) *OutageServer) {
	if testing.Short() {
		t.Skip("-short: the outage cases wait seconds each")
	}
	server := func(t *testing.T, restartable bool) *OutageServer {
		t.Helper()
		srv := start(t, restartable)
		if restartable && srv.Kill == nil {
			t.Skip("the server cannot be killed and restarted")
		}
		open := srv.Open
		srv.Open = func(t *testing.T, keep int, cut bool) store.Store {
			t.Helper()
			return closing(t, open(t, keep, cut))
		}
		return srv
	}
	// The cases run side by side: what must succeed on a healthy server
	// is retried (MustAppend, replayIDs), so that a neighbour that runs
	// out a store's short timeout only delays it; what must fail is
	// bounded generously (failsFast). They start at once (see
	// testwait.AtOnce): they spend their time waiting for outages to be
	// noticed and mended.
	testwait.AtOnce(t, map[string]func(t *testing.T){
		"CrashAndRestart":        func(t *testing.T) { testCrash(t, server(t, true)) },
		"HubsAcrossARestart":     func(t *testing.T) { testHubsRestart(t, server(t, true)) },
		"ClusterThroughARestart": func(t *testing.T) { testClusterRestart(t, server(t, true)) },
		"ResumeOnAnotherHub":     func(t *testing.T) { testResume(t, server(t, false)) },
		"Partition":              func(t *testing.T) { testPartition(t, server(t, false)) },
		"GapAfterRetention":      func(t *testing.T) { testGapAfterRetention(t, server(t, false), true) },
		"GapFromEmptyHistory":    func(t *testing.T) { testGapAfterRetention(t, server(t, false), false) },
		"LostReply":              func(t *testing.T) { testLostReply(t, server(t, false)) },
	})
}

// journal records what a store's feed passes to a listener: event ids
// and "GAP", in order, and its status changes.
type journal struct {
	mu     sync.Mutex
	log    []string
	status chan error
}

func record(t *testing.T, s store.Store) *journal {
	j := &journal{status: make(chan error, 100)}
	t.Cleanup(s.Listen(store.Listener{
		Event:  func(e *store.Event) { j.add(e.ID) },
		Status: func(err error) { j.status <- err },
		Gap:    func() { j.add("GAP") },
	}))
	return j
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.log = append(j.log, s)
	j.mu.Unlock()
}

func (j *journal) entries() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.log)
}

// wantStatus waits for the next status report: down or up.
func (j *journal) wantStatus(t *testing.T, down bool) {
	t.Helper()
	select {
	case err := <-j.status:
		if (err != nil) != down {
			t.Fatalf("feed status %v, want down=%v", err, down)
		}
	case <-time.After(testwait.Deadline):
		t.Fatalf("no feed status (want down=%v) within %v", down, testwait.Deadline)
	}
}

// settle waits until the journal ends with last, then checks that it
// holds exactly want.
func (j *journal) settle(t *testing.T, last string, want ...string) {
	t.Helper()
	testwait.For(t, "the feed to pass "+last, func() bool {
		log := j.entries()
		return len(log) > 0 && log[len(log)-1] == last
	})
	if got := j.entries(); !slices.Equal(got, want) {
		t.Fatalf("the feed passed %q, want %q", got, want)
	}
}

// failsFast checks that f fails, and within a few of the server's
// Timeouts: a store that cannot reach its server must not hang.
func failsFast(t *testing.T, srv *OutageServer, what string, f func() error) {
	t.Helper()
	start := time.Now()
	if err := f(); err == nil {
		t.Fatalf("%s succeeded while the server is out of reach", what)
	}
	if d, bound := time.Since(start), 3*srv.Timeout+2*time.Second; d > bound {
		t.Fatalf("%s took %v to fail, more than %v with a Timeout of %v", what, d, bound, srv.Timeout)
	}
}

// MustAppend appends e to a store whose server is up, retrying until
// testwait's deadline as a publisher would, and fails t if it never
// succeeds: a store's short timeout (which the outage cases need) can run
// out on a healthy server beside CPU hogs, and a retry of the same event
// is recorded once (see RetryRecordedOnce in [Run]).
func MustAppend(t testing.TB, s store.Store, e *store.Event) {
	t.Helper()
	var err error
	if !testwait.Within(testwait.Deadline, func() bool { err = s.Append(context.Background(), e); return err == nil }) {
		t.Fatalf("Append(%q): %v", e.ID, err)
	}
}

// replayIDs is ReplayIDs from the earliest event on a store whose server
// is up, retried like MustAppend.
func replayIDs(t *testing.T, s store.Store) []string {
	t.Helper()
	var ids []string
	var err error
	if !testwait.Within(testwait.Deadline, func() bool { ids, err = tryReplayIDs(s); return err == nil }) {
		t.Fatalf("Replay: %v", err)
	}
	return ids
}

func tryReplayIDs(s store.Store) ([]string, error) {
	b, err := s.Replay(context.Background(), store.Earliest)
	if err != nil {
		return nil, err
	}
	var ids []string
	for e, err := range b.Events {
		if err != nil {
			return nil, err
		}
		ids = append(ids, e.ID)
	}
	return ids, nil
}

func testCrash(t *testing.T, srv *OutageServer) {
	s := srv.Open(t, 0, false)
	j := record(t, s)
	MustAppend(t, s, NewEvent("before"))
	j.settle(t, "before", "before")

	srv.Kill(t)
	j.wantStatus(t, true)
	failsFast(t, srv, "Append", func() error { return s.Append(context.Background(), NewEvent("during")) })
	failsFast(t, srv, "Replay", func() error { _, err := s.Replay(context.Background(), store.Earliest); return err })
	record(t, s).wantStatus(t, true) // a listener added during the outage is told at once

	srv.Restart(t)
	j.wantStatus(t, false)
	testwait.For(t, "an append to succeed", func() bool { return s.Append(context.Background(), NewEvent("after")) == nil })
	j.settle(t, "after", "before", "after")
	if ids := replayIDs(t, s); !slices.Equal(ids, []string{"before", "after"}) {
		t.Fatalf("history after the restart: %q", ids)
	}
}

const (
	outageHubURL = "https://example.com/.well-known/mercure"
	outageTopic  = "https://example.com/books/1"
)

// hubOn is one app instance: a hub on a store of its own, served.
type hubOn struct {
	hub   *mercure.Hub
	store store.Store
	srv   *httptest.Server
}

func newHubOn(t *testing.T, s store.Store) *hubOn {
	t.Helper()
	h, err := mercure.New(outageHubURL, mercure.WithStore(s),
		mercure.WithAnonymousSubscribers(), mercure.WithInsecurePublishing(), mercure.WithSubscriptions(),
		mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	in := &hubOn{hub: h, store: s, srv: httptest.NewServer(h)}
	t.Cleanup(func() { // before the store closes
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		in.srv.Close()
	})
	return in
}

func (in *hubOn) subscribe(t *testing.T, lastEventID string) *Stream {
	t.Helper()
	return Subscribe(t, in.srv, "/.well-known/mercure", "match="+url.QueryEscape(outageTopic), lastEventID)
}

func (in *hubOn) publish(u mercure.Update) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u.Topics = []string{outageTopic}
	return in.hub.Publish(ctx, u)
}

// mustPublish publishes data with an id of its own, on a hub whose
// store's server is up: see publishOnce.
func (in *hubOn) mustPublish(t *testing.T, data string) string {
	t.Helper()
	return in.publishOnce(t, mercure.Update{ID: fmt.Sprintf("urn:outage:%d", outageN.Add(1)), Data: data})
}

var outageN atomic.Int64

// publishOnce publishes u, which has an id, on a hub whose store's server
// is up, retrying like MustAppend (a retry of the same update is
// recorded once), and returns the id the hub answered.
func (in *hubOn) publishOnce(t *testing.T, u mercure.Update) string {
	t.Helper()
	var id string
	var err error
	if !testwait.Within(testwait.Deadline, func() bool { id, err = in.publish(u); return err == nil }) {
		t.Fatalf("publish %q: %v", u.ID, err)
	}
	return id
}

// post publishes over HTTP and returns the status and body.
func (in *hubOn) post(t *testing.T, form url.Values) (int, string) {
	t.Helper()
	form.Set("topic", outageTopic)
	resp, err := http.PostForm(in.srv.URL+"/.well-known/mercure", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func testHubsRestart(t *testing.T, srv *OutageServer) {
	a, b := newHubOn(t, srv.Open(t, 0, false)), newHubOn(t, srv.Open(t, 0, false))
	sub := b.subscribe(t, "")
	var acked []string
	for i := range 5 {
		acked = append(acked, a.mustPublish(t, fmt.Sprint("before ", i)))
	}
	order := mercure.Update{ID: "order-1", Data: "paid"}
	if id := a.publishOnce(t, order); id != order.ID {
		t.Fatalf("publish %s: %q", order.ID, id)
	}
	acked = append(acked, order.ID)

	srv.Kill(t)
	failsFast(t, srv, "Publish", func() error {
		_, err := a.publish(mercure.Update{Data: "during"})
		if err != nil && !errors.Is(err, mercure.ErrStore) {
			t.Fatalf("publish during the outage: %v, want ErrStore", err)
		}
		return err
	})
	if status, body := a.post(t, url.Values{"data": {"during"}}); status != http.StatusServiceUnavailable {
		t.Fatalf("POST during the outage: %d %s, want 503", status, body)
	}
	testwait.For(t, "both hubs to report the outage", func() bool {
		return a.hub.Metrics().FeedError != nil && b.hub.Metrics().FeedError != nil
	})

	srv.Restart(t)
	testwait.For(t, "both hubs to report the feed back", func() bool {
		return a.hub.Metrics().FeedError == nil && b.hub.Metrics().FeedError == nil
	})
	acked = append(acked, a.mustPublish(t, "after 0"))
	// The publisher of order-1 never got its answer: it sends the update
	// again, to the other hub, then by POST.
	if id := b.publishOnce(t, order); id != order.ID {
		t.Fatalf("the same update again on the other hub: %q; want %s", id, order.ID)
	}
	var status int
	var body string
	testwait.Within(testwait.Deadline, func() bool { // 503 while a call outlasts the short Timeout
		status, body = a.post(t, url.Values{"id": {order.ID}, "data": {order.Data}})
		return status != http.StatusServiceUnavailable
	})
	if status != http.StatusOK || body != order.ID {
		t.Fatalf("the same update again by POST: %d %q, want 200 %s", status, body, order.ID)
	}
	for i := 1; i < 5; i++ {
		acked = append(acked, a.mustPublish(t, fmt.Sprint("after ", i)))
	}
	if got := sub.Collect(len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("subscriber of B got %q\nwant %q", got, acked)
	}
	resumed := a.subscribe(t, acked[1])
	if got := resumed.Collect(len(acked) - 2); !slices.Equal(got, acked[2:]) {
		t.Fatalf("replay on A after the restart: %q\nwant %q", got, acked[2:])
	}
}

func testResume(t *testing.T, srv *OutageServer) {
	a, b := newHubOn(t, srv.Open(t, 0, false)), newHubOn(t, srv.Open(t, 0, false))
	sub := a.subscribe(t, "")
	var first []string
	for i, in := range []*hubOn{b, a, b} {
		first = append(first, in.mustPublish(t, fmt.Sprint("first ", i)))
	}
	if got := sub.Collect(3); !slices.Equal(got, first) {
		t.Fatalf("hub A sent %q, want %q", got, first)
	}
	sub.Close()
	var rest []string
	for i, in := range []*hubOn{a, b, a, b} {
		rest = append(rest, in.mustPublish(t, fmt.Sprint("rest ", i)))
	}
	resumed := b.subscribe(t, first[2])
	if h := resumed.Header.Get("Mercure-Last-Event-ID"); h != first[2] {
		t.Fatalf("Mercure-Last-Event-ID %q, want %q (REC-9)", h, first[2])
	}
	if got := resumed.Collect(len(rest)); !slices.Equal(got, rest) {
		t.Fatalf("hub B resumed with %q, want %q", got, rest)
	}
	// A third hub starts from the store's last event (REC-13). The hubs
	// announce subscriptions asynchronously (sub's end, say), so that
	// events may still be recorded around c's start: its last event id
	// is the last of the history before it started, or one recorded
	// since, never an older one.
	before := replayIDs(t, b.store) // subscription events too
	c := newHubOn(t, srv.Open(t, 0, false))
	got := c.hub.LastEventID()
	after := replayIDs(t, b.store)
	if !slices.Equal(after[:len(before)], before) || !slices.Contains(after[len(before)-1:], got) {
		t.Fatalf("a third hub's LastEventID %q, want the last event when it started: %q or one recorded since, of %q (REC-13)", got, before[len(before)-1], after[len(before)-1:])
	}
}

func testPartition(t *testing.T, srv *OutageServer) {
	direct, cut := srv.Open(t, 0, false), srv.Open(t, 0, true)
	j := record(t, cut)
	MustAppend(t, direct, NewEvent("e0"))
	MustAppend(t, cut, NewEvent("e1"))
	j.settle(t, "e1", "e0", "e1")

	srv.Cut()
	j.wantStatus(t, true)
	failsFast(t, srv, "Append through a cut link", func() error { return cut.Append(context.Background(), NewEvent("lost")) })
	want := []string{"e0", "e1"}
	for i := range 600 { // more than a page of the feed
		id := fmt.Sprint("d", i)
		MustAppend(t, direct, NewEvent(id))
		want = append(want, id)
	}
	srv.Mend(t)
	j.wantStatus(t, false)
	testwait.For(t, "an append through the mended link", func() bool { return cut.Append(context.Background(), NewEvent("e2")) == nil })
	want = append(want, "e2")
	j.settle(t, "e2", want...)
	if ids := replayIDs(t, direct); !slices.Equal(ids, want) {
		t.Fatalf("history: %d events, want %d", len(ids), len(want))
	}
}

// testGapAfterRetention cuts a store off while another appends 30 events
// with a retention of 10: the first thing its feed passes of them is the
// gap, then the retained events, consecutive.
func testGapAfterRetention(t *testing.T, srv *OutageServer, readOne bool) {
	cut, direct := srv.Open(t, 10, true), srv.Open(t, 10, false)
	j := record(t, cut)
	var before []string
	if readOne {
		MustAppend(t, direct, NewEvent("before"))
		before = []string{"before"}
		j.settle(t, "before", before...)
	}
	srv.Cut()
	j.wantStatus(t, true)
	for i := range 30 {
		MustAppend(t, direct, NewEvent(fmt.Sprint("e", i)))
	}
	srv.Mend(t)
	j.wantStatus(t, false)
	testwait.For(t, "e29", func() bool { log := j.entries(); return len(log) > 0 && log[len(log)-1] == "e29" })
	log := j.entries()
	if len(log) < len(before)+2 || !slices.Equal(log[:len(before)], before) || log[len(before)] != "GAP" || log[len(before)+1] == "e0" {
		t.Fatalf("the feed passed %q, want %q, GAP, then the retained events", log, before)
	}
	var first int
	fmt.Sscanf(log[len(before)+1], "e%d", &first)
	for i, id := range log[len(before)+1:] {
		if id != fmt.Sprint("e", first+i) {
			t.Fatalf("the feed passed %q, want consecutive events after the gap", log)
		}
	}
}

func testLostReply(t *testing.T, srv *OutageServer) {
	s := srv.Open(t, 0, true)
	j := record(t, s)
	e := NewEvent("lost-reply-" + strings.Repeat("x", 8))
	lost := srv.LoseReply(e.ID)
	firstErr := s.Append(context.Background(), e)
	if !lost() {
		t.Fatal("no reply was lost: nothing to test")
	}
	t.Logf("the first attempt, its reply lost, returned %v", firstErr)
	var again *store.Event
	testwait.For(t, "the update sent again to be accepted", func() bool {
		again = RetryOf(e)
		return s.Append(context.Background(), again) == nil
	})
	if firstErr == nil && again.Seq != e.Seq {
		t.Fatalf("the update sent again got Seq %d, the first attempt %d", again.Seq, e.Seq)
	}
	MustAppend(t, s, NewEvent("end"))
	j.settle(t, "end", e.ID, "end")
	if ids := replayIDs(t, s); !slices.Equal(ids, []string{e.ID, "end"}) {
		t.Fatalf("history %q, want the update once", ids)
	}
}
