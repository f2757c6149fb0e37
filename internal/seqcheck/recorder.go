package seqcheck

import (
	"bufio"
	"net/http"
	"strings"
	"sync"
)

// Recorder records a subscriber's connections as an EventSource sees
// them: each block with data is an event, and the id-only block a stream
// opened without cursor starts with is its position. It is safe for
// concurrent use.
type Recorder struct {
	mu    sync.Mutex
	conns []Conn
	last  string
}

// NewRecorder returns a Recorder whose first connection resumes from
// last ("" for none).
func NewRecorder(last string) *Recorder { return &Recorder{last: last} }

// Last returns the last id the subscriber saw: what its next connection
// sends as Last-Event-ID.
func (r *Recorder) Last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Conns returns a copy of the connections recorded so far.
func (r *Recorder) Conns() []Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Conn, len(r.conns))
	for i, c := range r.conns {
		c.IDs = append([]string(nil), c.IDs...)
		out[i] = c
	}
	return out
}

// Check checks the connections recorded so far (see [Check]).
func (r *Recorder) Check(o Order, until string) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Check(o, r.conns, until)
}

// Read records resp, the 200 answer to a subscribe sent with
// Last-Event-ID requested ("" for none), as one connection, block by
// block, until its body ends.
func (r *Recorder) Read(resp *http.Response, requested string) {
	r.mu.Lock()
	c := Conn{Requested: requested}
	if requested != "" {
		c.Cursor = resp.Header.Get("Mercure-Last-Event-ID")
	}
	r.conns = append(r.conns, c)
	r.mu.Unlock()
	sc := bufio.NewScanner(resp.Body)
	var id string
	var data bool
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if id != "" {
				r.block(id, data, requested)
			}
			id, data = "", false
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data:"):
			data = true
		}
	}
}

// block records a block with id of the current connection.
func (r *Recorder) block(id string, data bool, requested string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &r.conns[len(r.conns)-1]
	switch {
	case data:
		c.IDs = append(c.IDs, id)
		r.last = id
	case requested == "" && c.Cursor == "" && len(c.IDs) == 0:
		c.Cursor = id // the position a stream opened without cursor starts at
		r.last = id
	}
}
