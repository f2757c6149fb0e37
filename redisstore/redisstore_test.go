package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/redisstore"
	"github.com/mercurekit/mercure/redisstore/redistest"
	"github.com/mercurekit/mercure/storetest"
	"github.com/redis/go-redis/v9"
)

var keyN atomic.Int64

// client returns a client of the server named by MERCURE_TEST_REDIS, or
// skips the test, and a stream key no other test uses. The keys are
// deleted when the test ends; nothing else of the server is touched.
// The client has [redistest.Options]: the store's timeout bounds its
// calls, not go-redis's defaults.
func client(t *testing.T) (*redis.Client, string) {
	t.Helper()
	addr := redistest.Addr(t)
	rdb := redis.NewClient(redistest.Options(addr))
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at %s: %v", addr, err)
	}
	key := fmt.Sprintf("mercure-test:%d:%d:%d", os.Getpid(), time.Now().UnixNano(), keyN.Add(1))
	t.Cleanup(func() { rdb.Del(context.Background(), key, key+":ids", key+":n") })
	return rdb, key
}

// open returns a store on key. Its calls are bounded by suiteTimeout
// unless opts say otherwise: the tests that are about the store's timeout
// set it themselves. Every test opens its stores on a healthy server, so
// that opening is retried until storetest.Deadline: a short timeout can
// run out on a loaded machine.
func open(t *testing.T, rdb redis.UniversalClient, key string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	var s *redisstore.Store
	var err error
	if !storetest.Within(storetest.Deadline, func() bool {
		s, err = redisstore.New(rdb, key, append([]redisstore.Option{suiteTimeout}, opts...)...)
		return err == nil
	}) {
		t.Fatal(err)
	}
	return s
}

// suiteTimeout bounds each call of the tests' stores (see open): they
// test what a store does, not its per-call bound (the outage tests'), and
// beside two CPU hogs and other test packages one call of a suite once
// took more than the default 5 s (on PostgreSQL).
var suiteTimeout = redisstore.WithTimeout(time.Minute)

func TestSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		rdb, key := client(t)
		return open(t, rdb, key, redisstore.WithMaxLen(0), suiteTimeout) // no limit
	})
}

// TestSuiteWithMaxLen runs the suite with the default retention,
// DefaultMaxLen: a store must have a bound unless told otherwise.
func TestSuiteWithMaxLen(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		rdb, key := client(t)
		s := open(t, rdb, key, suiteTimeout)
		if got := s.MaxLen(); got != redisstore.DefaultMaxLen {
			t.Fatalf("default retention %d entries, want %d", got, redisstore.DefaultMaxLen)
		}
		return s
	})
}

func TestSuiteRetention(t *testing.T) {
	t.Parallel()
	storetest.RunRetention(t, func(t *testing.T, keep int) store.Store {
		rdb, key := client(t)
		return open(t, rdb, key, redisstore.WithMaxLen(int64(keep)), suiteTimeout)
	})
}

// TestSharedStream checks that two stores on one stream share one
// sequence and one feed.
func TestSharedStream(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	a, b := open(t, rdb, key), open(t, rdb, key)
	defer a.Close()
	defer b.Close()
	got := make(chan *store.Event, 10)
	defer b.Listen(store.Listener{Event: func(e *store.Event) { got <- e }})()
	e1, e2 := storetest.NewEvent("x1"), storetest.NewEvent("x2")
	if err := a.Append(context.Background(), e1); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(context.Background(), e2); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*store.Event{e1, e2} {
		select {
		case e := <-got:
			if d := storetest.SameEvent(e, want); d != "" {
				t.Fatal(d)
			}
		case <-time.After(storetest.Deadline):
			t.Fatalf("store b did not deliver %s", want.ID)
		}
	}
	if _, ids := storetest.ReplayIDs(t, b, "x1"); strings.Join(ids, " ") != "x2" {
		t.Fatalf("replay after x1 on b: %q", ids)
	}
}

// TestTrimmedCursor checks that a cursor whose oldest occurrence was
// trimmed is unknown, and that the id is indexed again when republished.
func TestTrimmedCursor(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	s := open(t, rdb, key)
	defer s.Close()
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Append(context.Background(), storetest.NewEvent(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.XTrimMaxLen(context.Background(), key, 2).Err(); err != nil {
		t.Fatal(err)
	}
	b, ids := storetest.ReplayIDs(t, s, "a")
	if b.Cursor != store.Earliest || strings.Join(ids, " ") != "b c" {
		t.Fatalf("trimmed cursor: Cursor %q, events %q", b.Cursor, ids)
	}
	for _, id := range []string{"a", "d"} {
		if err := s.Append(context.Background(), storetest.NewEvent(id)); err != nil {
			t.Fatal(err)
		}
	}
	b, ids = storetest.ReplayIDs(t, s, "a")
	if b.Cursor != "a" || strings.Join(ids, " ") != "d" {
		t.Fatalf("republished cursor: Cursor %q, events %q", b.Cursor, ids)
	}
}

// TestMaxLen checks that the stream is trimmed (approximately).
func TestMaxLen(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	s := open(t, rdb, key, redisstore.WithMaxLen(10))
	defer s.Close()
	for i := range 1000 {
		if err := s.Append(context.Background(), storetest.NewEvent(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	n, err := rdb.XLen(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n >= 1000 || n < 10 {
		t.Fatalf("stream length %d after 1000 appends with MAXLEN ~ 10", n)
	}
	_, ids := storetest.ReplayIDs(t, s, store.Earliest)
	if len(ids) != int(n) || ids[len(ids)-1] != "m999" {
		t.Fatalf("replayed %d events ending %q, stream holds %d", len(ids), ids[len(ids)-1], n)
	}
}

// TestLongReplay checks paging across several XRANGE pages.
func TestLongReplay(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	s := open(t, rdb, key)
	defer s.Close()
	const total = 1300
	pipe := make([]*store.Event, total)
	for i := range total {
		pipe[i] = storetest.NewEvent(fmt.Sprint("r", i))
		if err := s.Append(context.Background(), pipe[i]); err != nil {
			t.Fatal(err)
		}
	}
	b, ids := storetest.ReplayIDs(t, s, "r99")
	if b.Head != pipe[total-1].Seq || len(ids) != total-100 || ids[0] != "r100" || ids[len(ids)-1] != "r1299" {
		t.Fatalf("Head %d, %d events", b.Head, len(ids))
	}
}

// TestReplayReadsLittleBeyondThePage watches, through MONITOR on a server
// of its own, the reads a replay of large entries makes: each page holds
// two entries (the one it starts from, passed already, comes without its
// fields and counts for nothing), and Redis reads about what the pages
// hold and one entry more per page, not 16 entries for each.
func TestReplayReadsLittleBeyondThePage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, false)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	s := open(t, rdb, "mercure", redisstore.WithMaxLen(0))
	defer s.Close()
	ctx := context.Background()
	const events = 16
	for i := range events {
		e := storetest.NewEvent(fmt.Sprint("big", i))
		e.Data = strings.Repeat("x", 400<<10) // two to a page of 1 MiB
		if err := s.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	storetest.ReplayIDs(t, s, store.Earliest) // the scripts loaded: one EVALSHA a page

	mon, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	r := bufio.NewReader(mon)
	if _, err := io.WriteString(mon, "MONITOR\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	if _, ids := storetest.ReplayIDs(t, s, store.Earliest); len(ids) != events {
		t.Fatalf("replayed %d events, want %d", len(ids), events)
	}
	const marker = "replay-done"
	if err := rdb.Echo(ctx, marker).Err(); err != nil {
		t.Fatal(err)
	}
	// Lines: time [db client] "COMMAND" "arg" …; a script's commands
	// follow its EVALSHA, as [db lua]. Only the page script's count: the
	// feed's own, which checks its position every second, may run
	// meanwhile.
	pages, read, calls := 0, 0, 0 // page scripts run; entries XRANGE … COUNT n may have read, in calls
	inPage := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(line)
		switch {
		case strings.Contains(line, `"`+marker+`"`):
		case len(f) > 3 && strings.EqualFold(f[3], `"EVALSHA"`):
			inPage = strings.Contains(line, fmt.Sprintf(`"%d"`, redisstore.PageBytes))
			if inPage {
				pages++
			}
			continue
		case len(f) > 3 && f[2] != "lua]":
			inPage = false // a command of a client, not of the script
			continue
		case inPage && len(f) == 9 && strings.EqualFold(f[3], `"XRANGE"`) && strings.EqualFold(f[7], `"COUNT"`):
			n, err := strconv.Atoi(strings.Trim(f[8], `"`))
			if err != nil {
				t.Fatalf("MONITOR line %q: %v", line, err)
			}
			read += n
			calls++
			continue
		default:
			continue
		}
		break
	}
	// Eight pages of two, or nine; for each, the entry it starts from and
	// one more to find where it ends; and the replay's start (the first
	// and last entries).
	if pages > events/2+1 {
		t.Errorf("a replay of %d entries of 400 KiB took %d pages of 1 MiB, want at most %d", events, pages, events/2+1)
	}
	if limit := events + 2*pages + 2; read > limit {
		t.Errorf("a replay of %d entries of 400 KiB read up to %d entries in %d XRANGE calls, want at most %d", events, read, calls, limit)
	}
	t.Logf("%d pages, %d entries read in %d XRANGE calls", pages, read, calls)
}

func TestClosed(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	s := open(t, rdb, key, redisstore.WithTimeout(redisstore.DefaultTimeout))
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := s.Append(context.Background(), storetest.NewEvent("z")); err != redisstore.ErrClosed {
		t.Fatalf("Append after Close: %v", err)
	}
}

// TestTwoHubs publishes on hub A and receives the update from a
// subscriber of hub B: two app instances sharing one stream act as one
// hub.
func TestTwoHubs(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	const hubURL = "https://example.com/.well-known/mercure"
	newHub := func() *mercure.Hub {
		s := open(t, rdb, key)
		t.Cleanup(func() { s.Close() })
		h, err := mercure.New(hubURL, mercure.WithStore(s), mercure.WithAnonymousSubscribers())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h.Shutdown(ctx)
		})
		return h
	}
	hubA, hubB := newHub(), newHub()
	srvB := httptest.NewServer(hubB)
	defer srvB.Close()

	const topic = "https://example.com/books/1"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		srvB.URL+"/.well-known/mercure?match="+url.QueryEscape(topic), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srvB.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("subscribe to hub B: %s: %s", resp.Status, body)
	}

	id, err := hubA.Publish(context.Background(), mercure.Update{Topics: []string{topic}, Data: "from A"})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var gotID, gotData string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			gotID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			gotData = strings.TrimPrefix(line, "data: ")
		case line == "" && gotData == "":
			gotID = "" // the stream's starting position: no event
		case line == "" && gotID != "":
			if gotID != id || gotData != "from A" {
				t.Fatalf("hub B sent id %q data %q, want id %q data %q", gotID, gotData, id, "from A")
			}
			return
		}
	}
	t.Fatalf("hub B's stream ended before the update: %v", sc.Err())
}

// EndStreams on one hub ends the selected streams of both hubs sharing
// a Redis stream.
func TestEndStreamsAcrossHubs(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	storetest.RunEndStreams(t, func(t *testing.T) (a, b store.Store) {
		a, b = open(t, rdb, key, suiteTimeout), open(t, rdb, key, suiteTimeout)
		t.Cleanup(func() { a.(*redisstore.Store).Close(); b.(*redisstore.Store).Close() })
		return a, b
	})
}

// TestReaderReconnects kills the feed's connections to Redis and checks
// that the listener resumes without a gap or a repeat.
func TestReaderReconnects(t *testing.T) {
	t.Parallel()
	admin, key := client(t)
	name := strings.ReplaceAll(key, ":", "-")
	o := redistest.Options(admin.Options().Addr)
	o.ClientName = name
	rdb := redis.NewClient(o)
	defer rdb.Close()
	s := open(t, rdb, key)
	defer s.Close()
	got := make(chan string, 100)
	defer s.Listen(store.Listener{Event: func(e *store.Event) { got <- e.ID }})()
	ctx := context.Background()
	var want []string
	for round := range 3 {
		for i := range 5 {
			id := fmt.Sprint("k", round, "-", i)
			want = append(want, id)
			if err := s.Append(ctx, storetest.NewEvent(id)); err != nil {
				t.Fatal(err)
			}
		}
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		killed := 0
		for line := range strings.SplitSeq(list, "\n") {
			if strings.Contains(line, " name="+name+" ") {
				id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
				if admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
					killed++
				}
			}
		}
		if killed == 0 {
			t.Fatal("no connection of the store to kill")
		}
	}
	for i, w := range want {
		select {
		case id := <-got:
			if id != w {
				t.Fatalf("event %d: got %s, want %s", i, id, w)
			}
		case <-time.After(storetest.Deadline):
			t.Fatalf("event %d (%s) not delivered", i, w)
		}
	}
	select {
	case id := <-got:
		t.Fatalf("extra event %s", id)
	case <-time.After(300 * time.Millisecond):
	}
}

// appendN appends events with the given id and distinct data.
func appendN(t *testing.T, s *redisstore.Store, id string, n int) {
	t.Helper()
	for i := range n {
		e := storetest.NewEvent(id)
		e.Data = fmt.Sprint(id, " #", i)
		if err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTrimKeepsIDsBounded checks that trimming removes the ids of the
// trimmed events from the hash: it stays as small as the stream.
func TestTrimKeepsIDsBounded(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	s := open(t, rdb, key, redisstore.WithMaxLen(10))
	defer s.Close()
	for i := range 1000 {
		appendN(t, s, fmt.Sprint("u", i), 1)
	}
	ctx := context.Background()
	n, err := rdb.XLen(ctx, key).Result()
	if err != nil || n < 10 || n > 11 {
		t.Fatalf("stream length %d (%v), want 10 or 11", n, err)
	}
	if ids, err := rdb.HLen(ctx, key+":ids").Result(); err != nil || ids != n {
		t.Fatalf("ids hash holds %d entries (%v) for %d events", ids, err, n)
	}
}

// TestREC7AfterTrim: when the oldest occurrence of a reused id is
// trimmed, the cursor resolves to the oldest retained one (REC-7), as
// long as the store recorded it; an id published more than 64 times is
// then unknown (a full replay rather than a gap) until all its
// occurrences are gone, and then forgotten.
func TestREC7AfterTrim(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	s := open(t, rdb, key, redisstore.WithMaxLen(100)) // slack 1: one trim per append past 100
	defer s.Close()
	appendN(t, s, "g", 70)
	for i := range 40 {
		appendN(t, s, fmt.Sprint("u", i), 1)
	}
	// 110 appends: g #0 to #9 are trimmed; the oldest retained g is #10.
	b, ids := storetest.ReplayIDs(t, s, "g")
	if b.Cursor != "g" || len(ids) != 99 || ids[0] != "g" || ids[58] != "g" || ids[59] != "u0" {
		t.Fatalf("cursor g after trimming 10 of its occurrences: Cursor %q, %d events", b.Cursor, len(ids))
	}

	for i := 40; i < 93; i++ {
		appendN(t, s, fmt.Sprint("u", i), 1)
	}
	// 163 appends: the 63 recorded first occurrences are trimmed; the
	// other retained ones (#63 to #69) are partly unrecorded.
	b, ids = storetest.ReplayIDs(t, s, "g")
	if b.Cursor != store.Earliest || len(ids) != 100 {
		t.Fatalf("cursor g past its recorded occurrences: Cursor %q, %d events, want earliest and 100", b.Cursor, len(ids))
	}

	for i := 93; i < 100; i++ {
		appendN(t, s, fmt.Sprint("u", i), 1)
	}
	if ok, err := rdb.HExists(context.Background(), key+":ids", "g").Result(); err != nil || ok {
		t.Fatalf("id g still in the hash (%v) after all its occurrences were trimmed", err)
	}
}

// TestForeignEntries: entries that a Store did not write are skipped by
// the replay as by the feed, instead of breaking every replay.
func TestForeignEntries(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	s := open(t, rdb, key)
	defer s.Close()
	f := listen(t, s)
	ctx := context.Background()
	appendN(t, s, "f1", 1)
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"other", "app"}}).Err(); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "f2", 1)
	if _, ids := storetest.ReplayIDs(t, s, store.Earliest); strings.Join(ids, " ") != "f1 f2" {
		t.Fatalf("replay over a foreign entry: %q", ids)
	}
	f.wantEvents(t, "f1", "f2")
}

// drain reads a backlog to its end: the ids yielded, and the error that
// ended it.
func drain(b store.Backlog) (ids []string, err error) {
	for e, err := range b.Events {
		if err != nil {
			return ids, err
		}
		ids = append(ids, e.ID)
	}
	return ids, nil
}

// TestReplayTrimmedUnder trims the stream between Replay and Events. The
// replay goes on when the numbers of the entries show that no event went
// with the entry it starts from, and reports the gap otherwise; entries a
// Store did not write ("-") carry no number and do not count; an entry
// deleted before the replay is no gap.
func TestReplayTrimmedUnder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, history string
		del           string // the id of an event deleted before the replay
		cursor        string
		keep          int64 // entries the trim leaves, -1 for no trim
		want          string
		gap           bool
	}{
		{"cursor trimmed, next kept", "a b c d", "", "b", 2, "c d", false},
		{"cursor and next trimmed", "a b c d", "", "b", 1, "", true},
		{"foreign entry trimmed after the cursor", "a b - c d", "", "b", 2, "c d", false},
		{"foreign entry kept after the trimmed cursor", "a b - c d", "", "b", 3, "c d", false},
		{"trimmed up to a foreign entry", "a b c - d", "", "b", 2, "", true},
		{"event deleted before the replay", "a b c d", "c", "b", -1, "d", false},
		{"cursor at head trimmed", "a b", "", "b", 0, "", false},
		{"earliest, first entry trimmed", "a b c", "", store.Earliest, 2, "", true},
		{"earliest, foreign entry kept", "a - b", "", store.Earliest, -1, "a b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, key := client(t)
			s := open(t, rdb, key)
			defer s.Close()
			ctx := context.Background()
			for _, id := range strings.Fields(tc.history) {
				if id == "-" {
					if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"other", "app"}}).Err(); err != nil {
						t.Fatal(err)
					}
					continue
				}
				e := storetest.NewEvent(id)
				if err := s.Append(ctx, e); err != nil {
					t.Fatal(err)
				}
				if id == tc.del {
					if err := rdb.XDel(ctx, key, entryID(e.Seq)).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			b, err := s.Replay(ctx, tc.cursor)
			if err != nil {
				t.Fatal(err)
			}
			if tc.keep >= 0 {
				if err := rdb.XTrimMaxLen(ctx, key, tc.keep).Err(); err != nil {
					t.Fatal(err)
				}
			}
			ids, err := drain(b)
			if got := strings.Join(ids, " "); got != tc.want || errors.Is(err, store.ErrHistoryGap) != tc.gap || err != nil && !tc.gap {
				t.Fatalf("replay from %s: %q then %v; want %q and gap %v", tc.cursor, got, err, tc.want, tc.gap)
			}
		})
	}
}

// entryID maps a Seq back to its stream entry id.
func entryID(seq uint64) string { return fmt.Sprintf("%d-%d", seq>>20, seq&(1<<20-1)) }

// TestReplayTrimmedBetweenPages trims the stream between two pages of a
// replay: up to the last entry read, which the next page starts from,
// the replay goes on; one entry more, it reports the gap.
func TestReplayTrimmedBetweenPages(t *testing.T) {
	t.Parallel()
	for _, more := range []int{0, 1} {
		t.Run(fmt.Sprint("trimmed past the last read: ", more), func(t *testing.T) {
			rdb, key := client(t)
			s := open(t, rdb, key)
			defer s.Close()
			ctx := context.Background()
			const total = redisstore.ReplayPage + 100
			var evs []*store.Event
			for i := range total {
				e := storetest.NewEvent(fmt.Sprint("p", i))
				if err := s.Append(ctx, e); err != nil {
					t.Fatal(err)
				}
				evs = append(evs, e)
			}
			b, err := s.Replay(ctx, store.Earliest)
			if err != nil {
				t.Fatal(err)
			}
			next, stop := iter.Pull2(b.Events)
			defer stop()
			// The first page: the first entry and ReplayPage more.
			read := redisstore.ReplayPage + 1
			for i := range read {
				if e, err, ok := next(); !ok || err != nil || e.ID != evs[i].ID {
					t.Fatalf("event %d: %v %v %v", i, e, err, ok)
				}
			}
			if err := rdb.XTrimMinID(ctx, key, entryID(evs[read+more].Seq)).Err(); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for {
				e, err, ok := next()
				if !ok {
					break
				}
				if err != nil {
					if more == 0 || !errors.Is(err, store.ErrHistoryGap) || len(ids) != 0 {
						t.Fatalf("after %d more events: %v", len(ids), err)
					}
					return
				}
				ids = append(ids, e.ID)
			}
			if more != 0 || len(ids) != total-read || ids[0] != evs[read].ID {
				t.Fatalf("trimmed %d past the last read: %d more events without error", more, len(ids))
			}
		})
	}
}

// A retry is recognised across the stores sharing a stream; with
// WithRetryWindow(0), a publisher's retry is recorded again.
func TestRetryWindow(t *testing.T) {
	t.Parallel()
	rdb, key := client(t)
	a, b := open(t, rdb, key), open(t, rdb, key, redisstore.WithRetryWindow(0))
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	first := storetest.NewEvent("order-1")
	if err := b.Append(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := storetest.RetryOf(first)
	if err := a.Append(ctx, again); err != nil || again.Seq != first.Seq {
		t.Fatalf("retry on another store: Seq %d (%v), want %d", again.Seq, err, first.Seq)
	}
	again = storetest.RetryOf(first)
	if err := b.Append(ctx, again); err != nil || again.Seq == first.Seq {
		t.Fatalf("retry with WithRetryWindow(0): Seq %d (%v), want a new entry", again.Seq, err)
	}
	if _, ids := storetest.ReplayIDs(t, a, store.Earliest); strings.Join(ids, " ") != "order-1 order-1" {
		t.Fatalf("history %q", ids)
	}
}

// TestCluster runs the hub-level contract with hubs on clients of one
// Redis stream, each with its own connections.
func TestCluster(t *testing.T) {
	t.Parallel()
	admin, key := client(t)
	storetest.RunCluster(t, func(t *testing.T) store.Store {
		rdb := redis.NewClient(redistest.Options(admin.Options().Addr))
		t.Cleanup(func() { rdb.Close() }) // after the store closes
		return open(t, rdb, key, redisstore.WithMaxLen(0), suiteTimeout)
	})
}
