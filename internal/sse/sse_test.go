package sse_test

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/mercurekit/mercure/internal/sse"
)

// event is one event as dispatched by a client following the WHATWG
// "event stream interpretation" algorithm.
type event struct {
	ID    string // last event ID at dispatch time
	Type  string // "" when no event field was given (a browser reports "message")
	Data  string
	Retry int64 // reconnection time at dispatch time; -1 if never set
}

// parseStream decodes b per the WHATWG HTML standard, section "Server-sent
// events", "Parsing an event stream" and "Interpreting an event stream". It
// returns the dispatched events and the comment lines (without the colon).
// Input after the last line terminator and an event not ended by an empty
// line are discarded, as the standard requires at end of file.
func parseStream(b []byte) (events []event, comments []string) {
	s := strings.TrimPrefix(string(b), "\uFEFF")
	var (
		lastID, typ string
		data        strings.Builder
		retry       int64 = -1
	)
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return events, comments // incomplete final line: discarded
		}
		line := s[:i]
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]

		if line == "" { // dispatch
			d := data.String()
			if d == "" {
				typ = ""
				continue
			}
			events = append(events, event{ID: lastID, Type: typ, Data: strings.TrimSuffix(d, "\n"), Retry: retry})
			data.Reset()
			typ = ""
			continue
		}
		if line[0] == ':' {
			comments = append(comments, line[1:])
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			typ = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID = value
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				if n, err := strconv.ParseInt(value, 10, 64); err == nil {
					retry = n
				}
			}
		}
	}
}

// normalize converts CRLF and lone CR to LF.
func normalize(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

const testID = "urn:uuid:0b5b6f9e-3c51-4f4a-9d3e-5a1d2c7e8f90"

// eventTests lists encodings; a row's retry is -1 (none) unless it sets retrySet.
var eventTests = []struct {
	name     string
	id       string
	typ      string
	retry    int64
	retrySet bool
	data     string
	want     string
}{
	{
		name: "SEC-1 data cannot forge fields",
		id:   "1", data: "x\nevent: mercure\nid: forged",
		want: "id: 1\ndata: x\ndata: event: mercure\ndata: id: forged\n\n",
	},
	{
		name: "SEC-1 data cannot end the event early",
		id:   "1", data: "x\n\nid: forged\r\rretry: 1\r\n\r\ndata: y",
		want: "id: 1\ndata: x\ndata: \ndata: id: forged\ndata: \ndata: retry: 1\ndata: \ndata: data: y\n\n",
	},
	{
		name: "SUB-16 CRLF, CR and LF are each one break",
		id:   "1", data: "a\r\nb\rc\n",
		want: "id: 1\ndata: a\ndata: b\ndata: c\ndata: \n\n",
	},
	{name: "empty data", id: "1", data: "", want: "id: 1\ndata: \n\n"},
	{name: "LF only", id: "1", data: "\n", want: "id: 1\ndata: \ndata: \n\n"},
	{name: "CRLF only", id: "1", data: "\r\n", want: "id: 1\ndata: \ndata: \n\n"},
	{name: "CR CR", id: "1", data: "\r\r", want: "id: 1\ndata: \ndata: \ndata: \n\n"},
	{name: "LF CR is two breaks", id: "1", data: "\n\r", want: "id: 1\ndata: \ndata: \ndata: \n\n"},
	{name: "leading space kept", id: "1", data: " leading", want: "id: 1\ndata:  leading\n\n"},
	{name: "leading colon kept", id: "1", data: ":x\n:", want: "id: 1\ndata: :x\ndata: :\n\n"},
	{
		name: "full example",
		id:   testID, typ: "book-updated", retry: 5000, data: "{\"title\":\n \"Dune\"}",
		want: "id: " + testID + "\nevent: book-updated\nretry: 5000\ndata: {\"title\":\ndata:  \"Dune\"}\n\n",
	},
	{name: "retry 0 sent", id: "1", typ: "t", retry: 0, retrySet: true, data: "d", want: "id: 1\nevent: t\nretry: 0\ndata: d\n\n"},
	{name: "retry negative omitted", id: "1", retry: -5, data: "d", want: "id: 1\ndata: d\n\n"},
	{name: "retry 1", id: "1", retry: 1, data: "d", want: "id: 1\nretry: 1\ndata: d\n\n"},
	{name: "retry max", id: "1", retry: 1<<63 - 1, data: "d", want: "id: 1\nretry: 9223372036854775807\ndata: d\n\n"},
	{name: "type omitted", id: "1", typ: "", data: "d", want: "id: 1\ndata: d\n\n"},
	{name: "empty id still written", id: "", data: "d", want: "id: \ndata: d\n\n"},
	{name: "id with leading space", id: " a", data: "d", want: "id:  a\ndata: d\n\n"},
	{name: "NUL in data kept", id: "1", data: "a\x00b", want: "id: 1\ndata: a\x00b\n\n"},
	{name: "non-ASCII data", id: "1", data: "é\u2028\u0085x", want: "id: 1\ndata: é\u2028\u0085x\n\n"},
	// The caller guarantees id and typ are single-line; these check the
	// defensive cut at the first CR or LF.
	{
		name: "defensive: LF in id", id: "1\nevent: forged", typ: "t", data: "d",
		want: "id: 1\nevent: t\ndata: d\n\n",
	},
	{
		name: "defensive: CR in type", id: "1", typ: "t\rdata: forged\r\r", data: "d",
		want: "id: 1\nevent: t\ndata: d\n\n",
	},
	{
		name: "defensive: type cut to empty is omitted", id: "1", typ: "\r\n\r\nid: x", data: "d",
		want: "id: 1\ndata: d\n\n",
	},
}

func init() {
	for i := range eventTests {
		if eventTests[i].retry == 0 && !eventTests[i].retrySet {
			eventTests[i].retry = -1
		}
	}
}

func TestAppendEvent(t *testing.T) {
	for _, tt := range eventTests {
		t.Run(tt.name, func(t *testing.T) {
			got := sse.AppendEvent(nil, tt.id, tt.typ, tt.retry, tt.data)
			if string(got) != tt.want {
				t.Errorf("AppendEvent(%q, %q, %d, %q)\n got %q\nwant %q", tt.id, tt.typ, tt.retry, tt.data, got, tt.want)
			}
			if n := sse.EncodedLen(tt.id, tt.typ, tt.retry, tt.data); n != len(got) {
				t.Errorf("EncodedLen = %d, len(AppendEvent) = %d", n, len(got))
			}

			// Appending keeps what dst held.
			prefix := []byte("prefix")
			got2 := sse.AppendEvent(prefix, tt.id, tt.typ, tt.retry, tt.data)
			if string(got2) != "prefix"+tt.want {
				t.Errorf("AppendEvent with non-empty dst = %q", got2)
			}

			// Structure: no CR anywhere; only the allowed fields; one event.
			if bytes.IndexByte(got, '\r') >= 0 {
				t.Errorf("output contains CR: %q", got)
			}
			checkStructure(t, got)
		})
	}
}

// checkStructure checks that b is one event made only of an id line, an
// optional event and retry line, data lines, and the final empty line.
func checkStructure(t *testing.T, b []byte) {
	t.Helper()
	s := string(b)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("event does not end with an empty line: %q", s)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n\n"), "\n")
	if !strings.HasPrefix(lines[0], "id: ") {
		t.Errorf("first line %q is not the id field", lines[0])
	}
	i := 1
	if i < len(lines) && strings.HasPrefix(lines[i], "event: ") {
		i++
	}
	if i < len(lines) && strings.HasPrefix(lines[i], "retry: ") {
		i++
	}
	if i == len(lines) {
		t.Errorf("no data line in %q", s)
	}
	for ; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "data: ") {
			t.Errorf("line %d %q is not a data line in %q", i, lines[i], s)
		}
	}
}

func TestAppendEventDecodes(t *testing.T) {
	for _, tt := range eventTests {
		t.Run(tt.name, func(t *testing.T) {
			checkDecode(t, tt.id, tt.typ, tt.retry, tt.data)
		})
	}
}

// checkDecode checks that AppendEvent's output decodes, per the WHATWG
// algorithm, to exactly the event that was encoded.
func checkDecode(t *testing.T, id, typ string, retry int64, data string) {
	t.Helper()
	out := sse.AppendEvent(nil, id, typ, retry, data)
	events, comments := parseStream(out)
	if len(comments) != 0 {
		t.Errorf("decoded comments %q from %q", comments, out)
	}
	if len(events) != 1 {
		t.Fatalf("decoded %d events from %q; want 1: %+v", len(events), out, events)
	}
	want := event{ID: cut(id), Type: cut(typ), Data: normalize(data), Retry: -1}
	if strings.Contains(want.ID, "\x00") {
		want.ID = "" // clients ignore an id with NUL and keep the previous one
	}
	if retry >= 0 {
		want.Retry = retry
	}
	if events[0] != want {
		t.Errorf("decoded %q\n got %+v\nwant %+v", out, events[0], want)
	}
}

// cut mirrors the documented defensive handling of CR and LF in id and typ.
func cut(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

func TestParseStream(t *testing.T) {
	// Sanity checks of the test parser itself against the standard's rules.
	events, comments := parseStream([]byte("\uFEFFdata: a\r\n: c\rdata:b\n\nevent: t\n\ndata\nid: 7\n\nid: x\x00\ndata: y\nretry: 1x\n\ndata: z"))
	want := []event{
		{ID: "", Type: "", Data: "a\nb", Retry: -1},
		{ID: "7", Type: "", Data: "", Retry: -1},
		{ID: "7", Type: "", Data: "y", Retry: -1},
	}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("events = %+v; want %+v", events, want)
	}
	if fmt.Sprint(comments) != fmt.Sprint([]string{" c"}) {
		t.Errorf("comments = %q", comments)
	}
}

// TestGoSSERoundTrip decodes the output with go-sse's reader, an independent
// client implementation.
func TestGoSSERoundTrip(t *testing.T) {
	cases := []struct{ id, typ, data string }{
		{testID, "book-updated", "{\"title\":\n \"Dune\"}"},
		{"1", "", ""},
		{"2", "", "x\n"},
		{"3", "t", "a\r\nb\rc\n"},
		{"4", "", "\r\r"},
		{"5", "", " leading"},
		{"6", "", "x\nevent: mercure\nid: forged"},
		{"7", "", "\n\ndata: y\n\n"},
	}
	var stream []byte
	for _, c := range cases {
		stream = sse.AppendEvent(stream, c.id, c.typ, 3000, c.data)
		stream = sse.AppendComment(stream, "keep\nalive")
		stream = append(stream, sse.KeepAlive...)
	}

	i := 0
	for ev, err := range gosse.Read(bytes.NewReader(stream), nil) {
		if err != nil {
			t.Fatalf("go-sse Read: %v", err)
		}
		if i >= len(cases) {
			t.Fatalf("go-sse decoded extra event %+v", ev)
		}
		c := cases[i]
		want := gosse.Event{LastEventID: c.id, Type: c.typ, Data: normalize(c.data)}
		if ev != want {
			t.Errorf("case %d: go-sse decoded %+v; want %+v", i, ev, want)
		}
		i++
	}
	if i != len(cases) {
		t.Errorf("go-sse decoded %d events; want %d", i, len(cases))
	}

	// The same stream through the WHATWG parser.
	events, _ := parseStream(stream)
	if len(events) != len(cases) {
		t.Fatalf("WHATWG parser decoded %d events; want %d", len(events), len(cases))
	}
	for i, c := range cases {
		want := event{ID: c.id, Type: c.typ, Data: normalize(c.data), Retry: 3000}
		if events[i] != want {
			t.Errorf("case %d: decoded %+v; want %+v", i, events[i], want)
		}
	}
}

func TestAppendComment(t *testing.T) {
	tests := []struct{ text, want string }{
		{"hello", ": hello\n"},
		{"", ": \n"},
		{"a\r\nb\rc\n", ": a\n: b\n: c\n: \n"},
		{"\ndata: forged\n\nid: x", ": \n: data: forged\n: \n: id: x\n"},
	}
	for _, tt := range tests {
		got := sse.AppendComment([]byte("p"), tt.text)
		if string(got) != "p"+tt.want {
			t.Errorf("AppendComment(%q) = %q; want %q", tt.text, got[1:], tt.want)
		}
		events, comments := parseStream(got[1:])
		if len(events) != 0 {
			t.Errorf("AppendComment(%q) dispatched %+v", tt.text, events)
		}
		if len(comments) != len(strings.Split(normalize(tt.text), "\n")) {
			t.Errorf("AppendComment(%q) decoded comments %q", tt.text, comments)
		}
		if n := emptyLines(got[1:]); n != 0 {
			t.Errorf("AppendComment(%q) wrote %d empty lines: a parser that dispatches every block would see a message", tt.text, n)
		}
	}

	// A comment, even a multi-line one, does not disturb the next event.
	stream := sse.AppendComment(nil, "x\r\ndata: forged")
	stream = sse.AppendEvent(stream, "1", "", -1, "d")
	events, _ := parseStream(stream)
	if len(events) != 1 || events[0].Data != "d" {
		t.Errorf("events after comment = %+v", events)
	}
}

// TestKeepAlive: the keep-alive is a comment line alone. Issue 41: with
// the empty line that ends a block, @microsoft/fetch-event-source, which
// dispatches every block, called onmessage with empty data at every
// keep-alive.
func TestKeepAlive(t *testing.T) {
	if sse.KeepAlive != ":\n" {
		t.Errorf("KeepAlive = %q", sse.KeepAlive)
	}
	events, comments := parseStream([]byte(sse.KeepAlive))
	if len(events) != 0 || len(comments) != 1 || comments[0] != "" {
		t.Errorf("KeepAlive decoded to events %+v, comments %q", events, comments)
	}
	if n := emptyLines([]byte(sse.KeepAlive)); n != 0 {
		t.Errorf("KeepAlive holds %d empty lines", n)
	}
	// Between two events, it changes neither.
	stream := sse.AppendEvent(nil, "1", "", -1, "a")
	stream = append(stream, sse.KeepAlive...)
	stream = sse.AppendEvent(stream, "2", "", -1, "b")
	if events, _ := parseStream(stream); len(events) != 2 || events[0].Data != "a" || events[1].Data != "b" || events[1].ID != "2" {
		t.Errorf("events around a keep-alive: %+v", events)
	}
}

// emptyLines counts the empty lines of b (CR, LF or CRLF line ends): the
// blocks that a parser dispatching every block, data or not, reports.
func emptyLines(b []byte) int {
	n, start := 0, true
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\r', '\n':
			if start {
				n++
			}
			if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
			start = true
		default:
			start = false
		}
	}
	return n
}

func TestAppendEventNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled() {
		t.Skip("allocation counts are not meaningful under coverage or race instrumentation")
	}
	buf := make([]byte, 0, 1024)
	data := strings.Repeat("a\r\nb\rc\n", 20)
	allocs := testing.AllocsPerRun(100, func() {
		buf = sse.AppendEvent(buf[:0], testID, "t", 5000, data)
		buf = sse.AppendComment(buf[:0], "x\ny")
	})
	if allocs != 0 {
		t.Errorf("AppendEvent into a large enough buffer: %v allocs; want 0", allocs)
	}

	allocs = testing.AllocsPerRun(100, func() {
		buf = sse.AppendEvent(nil, testID, "t", 5000, data)
	})
	if allocs != 1 {
		t.Errorf("AppendEvent into nil: %v allocs; want 1", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		buf = sse.AppendComment(nil, data)
	})
	if allocs != 1 {
		t.Errorf("AppendComment into nil: %v allocs; want 1", allocs)
	}
}

// raceEnabled reports whether the test binary was built with -race (see the
// race and norace test files).
func raceEnabled() bool { return raceDetector }

func FuzzAppendEvent(f *testing.F) {
	for _, tt := range eventTests {
		f.Add(tt.id, tt.typ, tt.retry, tt.data)
	}
	f.Add("", "", int64(-1), "\r\n\r\r\n\n")
	f.Add("\uFEFF", "\x00", int64(1), "\uFEFF\x00")
	f.Fuzz(func(t *testing.T, id, typ string, retry int64, data string) {
		out := sse.AppendEvent(nil, id, typ, retry, data)
		if n := sse.EncodedLen(id, typ, retry, data); n != len(out) {
			t.Fatalf("EncodedLen = %d, len(AppendEvent) = %d for %q", n, len(out), out)
		}
		if bytes.IndexByte(out, '\r') >= 0 {
			t.Fatalf("output contains CR: %q", out)
		}
		checkStructure(t, out)
		checkDecode(t, id, typ, retry, data)

		c := sse.AppendComment(nil, data)
		if events, comments := parseStream(c); len(events) != 0 ||
			len(comments) != strings.Count(normalize(data), "\n")+1 {
			t.Fatalf("AppendComment(%q) = %q decoded to %+v, %q", data, c, events, comments)
		}
	})
}

// ExampleAppendEvent shows the encoding of a typical Mercure update.
func ExampleAppendEvent() {
	b := sse.AppendEvent(nil, "urn:uuid:1", "book-updated", 5000, "{\"title\":\n \"Dune\"}")
	os.Stdout.Write(b)
	// Output:
	// id: urn:uuid:1
	// event: book-updated
	// retry: 5000
	// data: {"title":
	// data:  "Dune"}
}

var (
	benchData      = `{"@id":"/books/1","@type":"Book","title":"Dune","author":"Frank Herbert","isbn":"9780441172719"}`
	benchDataLines = "{\"@id\":\"/books/1\",\n\"title\":\"Dune\",\n\"author\":\"Frank Herbert\"}"
	benchSink      []byte
	benchLenSink   int
)

func BenchmarkAppendEvent(b *testing.B) {
	for _, bc := range []struct{ name, data string }{
		{"1line", benchData},
		{"3lines", benchDataLines},
	} {
		b.Run(bc.name+"/reused", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sse.EncodedLen(testID, "", -1, bc.data)))
			buf := make([]byte, 0, 512)
			for b.Loop() {
				buf = sse.AppendEvent(buf[:0], testID, "", -1, bc.data)
			}
			benchSink = buf
		})
		b.Run(bc.name+"/nil", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sse.EncodedLen(testID, "", -1, bc.data)))
			for b.Loop() {
				benchSink = sse.AppendEvent(nil, testID, "", -1, bc.data)
			}
		})
	}
}

func BenchmarkEncodedLen(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		benchLenSink = sse.EncodedLen(testID, "", -1, benchDataLines)
	}
}
