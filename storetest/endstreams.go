package storetest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// RunEndStreams checks [mercure.Hub.EndStreams] across two hubs sharing
// a store: open returns two stores on the same data (the same
// [memstore.Store] twice, or two clients of one Redis stream), one
// per hub. The streams that a filter selects end on both hubs, those it
// does not select stay; a stream opened after the instruction stays; no
// stream receives the instruction, live or replayed.
func RunEndStreams(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
	const hubURL = "https://example.com/.well-known/mercure"
	storeA, storeB := open(t)
	sessions := map[string]string{"s1": "alice", "s2": "alice", "s3": "bob", "admin": "root"}
	authorize := func(r *http.Request) (*mercure.Access, error) {
		c, err := r.Cookie("session")
		if err != nil || sessions[c.Value] == "" {
			return nil, nil
		}
		return &mercure.Access{Subject: sessions[c.Value], Session: c.Value, Subscribe: []mercure.Match{{Pattern: "*"}}}, nil
	}
	newHub := func(s store.Store) (*mercure.Hub, string) {
		h, err := mercure.New(hubURL, mercure.WithStore(s), mercure.WithAuthorizer(authorize, time.Hour), mercure.WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h.Shutdown(ctx)
			srv.Close()
		})
		return h, srv.URL
	}
	hubA, urlA := newHub(storeA)
	hubB, urlB := newHub(storeB)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // past every wait below
	defer cancel()
	stream := func(base, session string, header ...string) *endStream {
		t.Helper()
		return openEndStream(ctx, t, base+"/.well-known/mercure?match=*", append([]string{"Cookie", "session=" + session}, header...)...)
	}
	marker := 0
	// sync publishes a marker and waits for every stream in wait to get
	// it: the store's feed, in order, delivered each hub what came before.
	sync := func(wait ...*endStream) {
		t.Helper()
		marker++
		data := "marker " + strings.Repeat("|", marker)
		if _, err := hubA.Publish(ctx, mercure.Update{Topics: []string{"https://example.com/m"}, Data: data}); err != nil {
			t.Fatal(err)
		}
		for _, s := range wait {
			s.waitData(t, data)
		}
	}

	a1, a3 := stream(urlA, "s1"), stream(urlA, "s3")
	b1, b2, b3 := stream(urlB, "s1"), stream(urlB, "s2"), stream(urlB, "s3")
	admin := stream(urlB, "admin")
	sync(a1, a3, b1, b2, b3, admin)

	// By session: alice's s1, on both hubs; hub A's before EndStreams returns.
	if err := hubA.EndStreams(ctx, mercure.StreamFilter{Session: "s1"}); err != nil {
		t.Fatalf("EndStreams(s1): %v", err)
	}
	a1.waitEnd(t, "alice's s1 on hub A")
	b1.waitEnd(t, "alice's s1 on hub B")
	sync(a3, b2, b3, admin)

	// By subject, from the other hub: alice's every session.
	if err := hubB.EndStreams(ctx, mercure.StreamFilter{Subject: "alice"}); err != nil {
		t.Fatalf("EndStreams(alice): %v", err)
	}
	b2.waitEnd(t, "alice's s2 on hub B")
	sync(a3, b3, admin) // both hubs saw the instruction, and bob stays

	// Alice logs in again: her new streams stay.
	again := []*endStream{stream(urlA, "s2"), stream(urlB, "s2")}
	sync(append(again, a3, b3, admin)...)
	for _, s := range append(again, a3, b3, admin) {
		if s.ended() {
			t.Fatal("a stream that no instruction selected ended")
		}
	}

	// No stream got an instruction, live or replayed.
	replay := stream(urlB, "admin", "Last-Event-ID", store.Earliest)
	sync(replay)
	for _, s := range []*endStream{admin, replay, a3} {
		if got := s.typed("mercure"); len(got) != 0 {
			t.Errorf("a stream received hub events: %q", got)
		}
	}
	if err := hubA.EndStreams(ctx, mercure.StreamFilter{}); err == nil {
		t.Error("EndStreams with an empty filter: no error")
	}
}

// endStream is an SSE stream read on a goroutine of its own.
type endStream struct {
	mu     sync.Mutex
	cond   *sync.Cond
	data   []string
	types  []string
	done   bool
	cancel context.CancelFunc
}

func openEndStream(ctx context.Context, t *testing.T, u string, header ...string) *endStream {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin") // a browser, on the hub's pages
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("subscribe %s: %d %s", u, res.StatusCode, b)
	}
	s := &endStream{cancel: cancel}
	s.cond = sync.NewCond(&s.mu)
	t.Cleanup(cancel)
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				s.data = append(s.data, v)
			} else if v, ok := strings.CutPrefix(line, "event: "); ok {
				s.types = append(s.types, v)
			}
			s.cond.Broadcast()
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.done = true
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	return s
}

// waitFor waits until cond, checked under the lock, holds.
func (s *endStream) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timer := time.AfterFunc(testwait.Deadline, func() {
		s.mu.Lock()
		s.done = true // wakes the wait: it fails below
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !cond() {
		if s.done {
			t.Fatalf("%s: the stream ended first (or %v passed)", what, testwait.Deadline)
		}
		s.cond.Wait()
	}
}

func (s *endStream) waitData(t *testing.T, data string) {
	t.Helper()
	s.waitFor(t, "waiting for "+data, func() bool {
		for _, d := range s.data {
			if d == data {
				return true
			}
		}
		return false
	})
}

func (s *endStream) waitEnd(t *testing.T, what string) {
	t.Helper()
	timer := time.AfterFunc(testwait.Deadline, s.cancel)
	defer timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.done {
		s.cond.Wait()
	}
	if !timer.Stop() {
		t.Fatalf("%s: the stream did not end within %v", what, testwait.Deadline)
	}
}

func (s *endStream) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *endStream) typed(typ string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, v := range s.types {
		if v == typ {
			out = append(out, v)
		}
	}
	return out
}
