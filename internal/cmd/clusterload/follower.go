package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure/internal/seqcheck"
)

// follower is a subscriber that behaves as an EventSource behind a load
// balancer: it resumes with the last id it saw (its position block
// included), on its hub, or on the next hub alive once its hub is dead.
type follower struct {
	hubs   []*hub
	at     int // its hub; its goroutine's
	lat    *latencies
	rec    seqcheck.Recorder
	opened atomic.Int32
	ends   atomic.Int32 // streams the hub ended
	moved  atomic.Int32 // times it moved to another hub

	mu    sync.Mutex
	opens []time.Time // when each connection the recorder holds opened
}

// lastID returns the id the follower resumes with.
func (f *follower) lastID() string { return f.rec.Last() }

// check checks the follower's connections against the store's order.
func (f *follower) check(o seqcheck.Order, until string) seqcheck.Result {
	return f.rec.Check(o, until)
}

// gaps returns when the follower's resumes that a hub answered with
// another cursor than the one asked for opened: when it was told of a
// gap.
func (f *follower) gaps() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var at []time.Time
	for i, c := range f.rec.Conns() {
		if c.Requested != "" && c.Cursor != c.Requested && i < len(f.opens) {
			at = append(at, f.opens[i])
		}
	}
	return at
}

var streamClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}

// run connects until ctx ends, and again 200 ms after a refusal.
func (f *follower) run(ctx context.Context) {
	for ctx.Err() == nil {
		if h := pick(f.hubs, f.at); h != f.hubs[f.at] {
			f.at = slices.Index(f.hubs, h)
			f.moved.Add(1)
		}
		if !f.connect(ctx, f.hubs[f.at]) {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // refused: try again
			}
		}
	}
}

// connect opens one stream, resuming from the last id seen, and reads it
// until it ends; false if the hub refused it.
func (f *follower) connect(ctx context.Context, h *hub) bool {
	last := f.lastID()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"?match="+url.QueryEscape(topic), nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return false
	}
	f.opened.Add(1)
	f.mu.Lock()
	f.opens = append(f.opens, time.Now())
	f.mu.Unlock()
	tapped := *resp
	tapped.Body = io.NopCloser(io.TeeReader(resp.Body, &latencyTap{lat: f.lat}))
	f.rec.Read(&tapped, last)
	if ctx.Err() == nil {
		f.ends.Add(1)
	}
	return true
}

// reads them: data tells whether it fires an event.
func readStream(r io.Reader, event func(id string, data bool)) {
	sc := bufio.NewScanner(r)
	var id string
	var data bool
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if id != "" {
				event(id, data)
			}
			id, data = "", false
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data:"):
			data = true
		}
	}
}

// storeOrder replays the history through a hub, up to the event until.
func storeOrder(base, until string) []string {
	req, _ := http.NewRequest(http.MethodGet, base+"?match="+url.QueryEscape(topic), nil)
	req.Header.Set("Last-Event-ID", seqcheck.Earliest)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := streamClient.Do(req.WithContext(ctx))
	check(err)
	defer resp.Body.Close()
	var ids []string
	done := false
	readStream(resp.Body, func(id string, data bool) {
		if data && !done {
			ids = append(ids, id)
			if id == until {
				done = true
				cancel()
			}
		}
	})
	if !done {
		fatalf("the replay of the history ended before %q", until)
	}
	return ids
}
