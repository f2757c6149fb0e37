package seqcheck

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// A Recorder reads blocks as an EventSource does: the position block (an
// id without data) of a stream opened without cursor is its cursor, not
// an event; comments and retry lines are skipped; a resume records the
// hub's Mercure-Last-Event-ID; and the records, checked against the
// order, find a skipped event.
func TestRecorder(t *testing.T) {
	r := NewRecorder("")
	resp := func(body string, hdr http.Header) *http.Response {
		return &http.Response{StatusCode: 200, Header: hdr, Body: io.NopCloser(strings.NewReader(body))}
	}
	r.Read(resp(": hello\n\nid: p\n\nretry: 1000\n\nid: A0\ndata: x\n\n", http.Header{}), "")
	if r.Last() != "A0" {
		t.Fatalf("last %q, want A0", r.Last())
	}
	r.Read(resp("id: B0\ndata: y\ndata: z\n\nid: A2\ndata: w\n\n", http.Header{"Mercure-Last-Event-Id": {"A0"}}), r.Last())
	conns := r.Conns()
	if len(conns) != 2 || conns[0].Cursor != "p" || !slices.Equal(conns[0].IDs, []string{"A0"}) ||
		conns[1].Requested != "A0" || conns[1].Cursor != "A0" || !slices.Equal(conns[1].IDs, []string{"B0", "A2"}) {
		t.Fatalf("recorded %+v", conns)
	}
	o := NewOrder(strings.Fields("x p A0 B0 A1 A2"), nil)
	if res := r.Check(o, "A2"); res.LostSilently != 1 || res.Delivered != 3 || res.OK() {
		t.Fatalf("A1 skipped: %+v", res)
	}
}
