package client

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	gosse "github.com/tmaxmax/go-sse"
)

func readAll(r io.Reader, maxEvent int) ([]Event, error) {
	er := newEventReader(r, maxEvent)
	var out []Event
	for {
		ev, err := er.next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// The parser follows the HTML standard's interpretation of a stream.
func TestEventReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Event
	}{
		{"fields", "id: 1\nevent: t\nretry: 20\ndata: a\ndata:  b\n\n", []Event{{ID: "1", Type: "t", Data: "a\n b", Retry: ptr(20 * time.Millisecond)}}},
		{"line endings", "id: 1\r\ndata: a\rdata: b\r\n\rid: 2\ndata\n\n", []Event{{ID: "1", Data: "a\nb"}, {ID: "2", Data: ""}}},
		{"no data, no event; the id stays", "id: 1\nevent: x\n\ndata: y\n\n", []Event{{ID: "1", Data: "y"}}},
		{"comments, unknown fields, bad retry, NUL id", "\uFEFF: hi\nfoo: bar\nretry: 1x\nid: a\x00b\ndata: z\n\n", []Event{{Data: "z"}}},
		{"cut mid-event", "id: 1\ndata: a\n\nid: 2\ndata: b\n", []Event{{ID: "1", Data: "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := readAll(r, 1<<10)
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			}
		})
	}
	if _, err := readAll(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50); err != errEventTooLarge {
		t.Fatalf("oversized event: %v", err)
	}
}

// Any input parses the same whole and a byte at a time (a CR at the end of
// one read and an LF at the start of the next are one line break), and,
// where every block has a data field, as go-sse's reader parses it.
func FuzzEventReader(f *testing.F) {
	for _, s := range []string{"id: 1\ndata: a\n\n", "data: a\r\rdata: b\r\n\r\n", "event: x\n\nid\x00\ndata\n\n", "retry: 5\ndata:\n\n\n", "\uFEFFdata: x\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		whole, errWhole := readAll(strings.NewReader(s), 1<<16)
		bytewise, errBytes := readAll(iotest.OneByteReader(strings.NewReader(s)), 1<<16)
		if !reflect.DeepEqual(whole, bytewise) || errWhole != errBytes {
			t.Fatalf("whole %+v (%v), byte by byte %+v (%v)", whole, errWhole, bytewise, errBytes)
		}
		for _, ev := range whole {
			if strings.ContainsRune(ev.ID, 0) || strings.ContainsAny(ev.Data+ev.Type+ev.ID, "\r") {
				t.Fatalf("bad event %+v", ev)
			}
		}
		// go-sse also dispatches blocks without data; compare only
		// inputs where each block has data.
		for _, block := range strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(s), "\n\n") {
			if !strings.Contains("\n"+block, "\ndata") || strings.HasPrefix(s, "\uFEFF") {
				return
			}
		}
		var theirs []Event
		for ev, err := range gosse.Read(strings.NewReader(s), &gosse.ReadConfig{MaxEventSize: 1 << 16}) {
			if err != nil {
				return
			}
			theirs = append(theirs, Event{ID: ev.LastEventID, Type: ev.Type, Data: ev.Data})
		}
		var ours []Event
		for _, ev := range whole {
			ours = append(ours, Event{ID: ev.ID, Type: ev.Type, Data: ev.Data})
		}
		if !reflect.DeepEqual(ours, theirs) {
			t.Fatalf("ours %+v, go-sse %+v", ours, theirs)
		}
	})
}

// ptr returns a pointer to v: new(v) needs Go 1.26, and the module
// supports Go 1.25.
func ptr[T any](v T) *T { return &v }
