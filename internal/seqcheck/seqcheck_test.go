package seqcheck

import (
	"reflect"
	"strings"
	"testing"
)

// Events of other topics in the order: positions may name them, they
// are never expected.
func TestCheckRelevant(t *testing.T) {
	o := NewOrder(strings.Fields("a X b Y c d Z"), func(id string) bool { return id == strings.ToLower(id) })
	if r := Check(o, []Conn{{Cursor: "X", IDs: []string{"b", "c", "d"}}}, "d"); !r.OK() || r.Delivered != 3 {
		t.Fatalf("position on another topic: %+v", r)
	}
	if r := Check(o, []Conn{{Cursor: "X", IDs: []string{"b", "d"}}}, "d"); r.LostSilently != 1 {
		t.Fatalf("c skipped: %+v", r)
	}
	if r := Check(o, []Conn{{Cursor: "a", IDs: []string{"b"}}, {Requested: "b", Cursor: "b", IDs: []string{"c", "d"}}}, "Z"); !r.OK() || r.Delivered != 3 {
		t.Fatalf("until an event of another topic: %+v", r)
	}
	if r := Check(o, []Conn{{Cursor: "a", IDs: []string{"Y"}}}, ""); r.Unknown != 1 {
		t.Fatalf("an event of another topic received: %+v", r)
	}
}

func TestCheck(t *testing.T) {
	o := NewOrder(strings.Fields("a b c d e f g"), nil)
	conns := func(s ...string) []Conn { // "requested cursor ids..." per connection, "-" for none
		var cs []Conn
		for _, c := range s {
			f := strings.Fields(c)
			req := f[0]
			if req == "-" {
				req = ""
			}
			cs = append(cs, Conn{Requested: req, Cursor: f[1], IDs: f[2:]})
		}
		return cs
	}
	for _, tc := range []struct {
		name  string
		conns []Conn
		until string
		want  Result
	}{
		{"one stream", conns("- a b c d e f g"), "g", Result{Delivered: 6}},
		{"from earliest", conns("- earliest a b c"), "c", Result{Delivered: 3}},
		{"resumed exactly", conns("- a b c", "c c d e f g"), "g", Result{Delivered: 6}},
		{"skip in a stream", conns("- a b d e f g"), "g", Result{Delivered: 5, LostSilently: 1}},
		{"twice in a stream", conns("- a b c c d"), "d", Result{Delivered: 3, Duplicates: 1}},
		{"out of order", conns("- a c b d"), "d", Result{Delivered: 2, LostSilently: 1, Duplicates: 1}},
		{"resumed too late", conns("- a b", "b b d e f g"), "g", Result{Delivered: 5, LostSilently: 1}},
		{"resumed too early", conns("- a b c", "c c b c d"), "d", Result{Delivered: 3, Duplicates: 2}},
		{"gap reported", conns("- a b", "b e f g"), "g", Result{Delivered: 3, Gaps: 1, LostWithGap: 3}},
		{"gap from earliest", conns("- c d e", "e earliest a b c d e f g"), "g", Result{Delivered: 7, Gaps: 1, Redelivered: 2}},
		{"tail missing", conns("- a b c"), "f", Result{Delivered: 2, Missing: 3}},
		{"unknown id", conns("- a b zz c"), "c", Result{Delivered: 2, Unknown: 1}},
		{"opened at the end", conns("- g"), "g", Result{}},
		{"opened late, missing", conns("- d e"), "g", Result{Delivered: 1, Missing: 2}},
		{"new stream later", conns("- a b", "- d e f g"), "g", Result{Delivered: 4}},
		// A failover lost xx and yy: told by the next resume, or not.
		{"vanished, told", conns("- a b xx", "xx earliest a b c d e f g"), "g", Result{Delivered: 7, Gaps: 1, Redelivered: 1, Vanished: 1}},
		{"vanished, not told", conns("- a b xx", "xx xx c d e f g"), "g", Result{Delivered: 1, Unknown: 2, Missing: 5}},
		{"vanished position, told", conns("- yy c d", "d earliest a b c d e f g"), "g", Result{Delivered: 7, Gaps: 1, Redelivered: 2, Vanished: 1}},
		{"vanished at the end", conns("- a b xx"), "b", Result{Delivered: 1, Unknown: 1}},
		// d and c vanished, and their retries recorded them as c, d:
		// the hub took d for an unknown cursor.
		{"vanished, recorded again", conns("- a b d c", "c earliest a b c d e f g"), "g", Result{Delivered: 7, Gaps: 1, Redelivered: 2, Vanished: 1}},
		{"out of order, not told", conns("- a b d c", "c c d e f g"), "g", Result{Delivered: 5, LostSilently: 1, Duplicates: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(o, tc.conns, tc.until)
			errs := got.Errors
			got.Errors = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v (%q)", got, tc.want, errs)
			}
			if got.OK() != (tc.want.LostSilently+tc.want.Duplicates+tc.want.Unknown+tc.want.Missing == 0) {
				t.Fatalf("OK() = %v for %+v", got.OK(), got)
			}
		})
	}
}
