package form

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestParse(t *testing.T) {
	type P = Pair
	tests := []struct {
		in   string
		want []Pair
	}{
		{"", nil},
		{"a=1&b=2", []P{{"a", "1"}, {"b", "2"}}},
		{"a", []P{{"a", ""}}},
		{"a=", []P{{"a", ""}}},
		{"=b", []P{{"", "b"}}},
		{"=", []P{{"", ""}}},
		{"&", nil},
		{"&&a=1&&", []P{{"a", "1"}}},
		{"a=1=2", []P{{"a", "1=2"}}},
		{"a==", []P{{"a", "="}}},
		{"a+b=c+d", []P{{"a b", "c d"}}},
		{"++=++", []P{{"  ", "  "}}},
		{"a%2Bb=%2b", []P{{"a+b", "+"}}},
		{"%zz=%4", []P{{"%zz", "%4"}}},
		{"%", []P{{"%", ""}}},
		{"%=%", []P{{"%", "%"}}},
		{"%%41=%4%41", []P{{"%A", "%4A"}}},
		{"%2=%2+", []P{{"%2", "%2 "}}},
		{"%+1=1", []P{{"% 1", "1"}}},
		{"%41%4a%4A=%7e", []P{{"AJJ", "~"}}},
		{"%g1=%1g", []P{{"%g1", "%1g"}}},
		{"x=%E2%82%AC", []P{{"x", "€"}}},
		{"x=%ff", []P{{"x", "\xff"}}},
		{"x=%ED%A0%80", []P{{"x", "\xed\xa0\x80"}}},
		{"x=%00", []P{{"x", "\x00"}}},
		{"x=%2B%20+", []P{{"x", "+  "}}},
		{"a;b=c", []P{{"a;b", "c"}}},
		{"a=1;b=2", []P{{"a", "1;b=2"}}},
		{"a=1&a=2&b=3&a=4", []P{{"a", "1"}, {"a", "2"}, {"b", "3"}, {"a", "4"}}},
		{"%26=%3D", []P{{"&", "="}}},
		{"a=%26b%3Dc&d", []P{{"a", "&b=c"}, {"d", ""}}},
		{"caf\xc3\xa9=\xff", []P{{"café", "\xff"}}}, // raw bytes pass through
		{
			"topic=https%3A%2F%2Fexample.com%2Fbooks%2F1&data=%7B%22status%22%3A%22out%22%7D&private=on",
			[]P{{"topic", "https://example.com/books/1"}, {"data", `{"status":"out"}`}, {"private", "on"}},
		},
	}
	for _, tt := range tests {
		got := Parse(tt.in)
		if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("Parse(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if ref := referenceParse(tt.in); len(ref) != len(tt.want) || (len(ref) > 0 && !reflect.DeepEqual(ref, tt.want)) {
			t.Errorf("referenceParse(%q) = %q, want %q (test table is wrong?)", tt.in, ref, tt.want)
		}
	}
}

func TestAppendParse(t *testing.T) {
	dst := []Pair{{"keep", "me"}}
	got := AppendParse(dst, "a=1&b+c=%21")
	want := []Pair{{"keep", "me"}, {"a", "1"}, {"b c", "!"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("AppendParse = %q, want %q", got, want)
	}
	if got := AppendParse(dst[:1], ""); len(got) != 1 {
		t.Fatalf("AppendParse(dst, \"\") = %q, want dst unchanged", got)
	}
}

// TestSubstrings checks that names and values needing no decoding share the
// input's memory.
func TestSubstrings(t *testing.T) {
	in := "topic=https://example.com/books/1&private"
	got := Parse(in)
	base := uintptr(unsafe.Pointer(unsafe.StringData(in)))
	for _, p := range got {
		for _, s := range []string{p.Name, p.Value} {
			if s == "" {
				continue
			}
			if ptr := uintptr(unsafe.Pointer(unsafe.StringData(s))); ptr < base || ptr >= base+uintptr(len(in)) {
				t.Errorf("%q is a copy, want a substring of the input", s)
			}
		}
	}
}

func TestAllocs(t *testing.T) {
	dst := make([]Pair, 0, 8)
	tests := []struct {
		in   string
		want float64
	}{
		{"topic=https://example.com/books/1&private=on&a&=b", 0},
		{"a+b=1", 1},
		{"a=%21", 1},
		{"a+b=%21&c=d", 2},
		{"topic=https%3A%2F%2Fexample.com%2Fbooks%2F1&data=%7B%22status%22%3A%22out%22%7D&private=on", 2},
	}
	for _, tt := range tests {
		n := testing.AllocsPerRun(100, func() { dst = AppendParse(dst[:0], tt.in) })
		if n != tt.want {
			t.Errorf("AppendParse(%q) allocates %v times, want %v", tt.in, n, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { Parse("a=1&b=2&c=3") }); n != 1 {
		t.Errorf("Parse of plain input allocates %v times, want 1 (the slice)", n)
	}
}

// referenceParse is a deliberately naive transcription of the WHATWG
// application/x-www-form-urlencoded parser, minus the UTF-8 decoding step.
func referenceParse(s string) []Pair {
	var out []Pair
	for _, seq := range strings.Split(s, "&") {
		if seq == "" {
			continue
		}
		name, value := seq, ""
		if i := strings.Index(seq, "="); i >= 0 {
			name, value = seq[:i], seq[i+1:]
		}
		name = strings.ReplaceAll(name, "+", " ")
		value = strings.ReplaceAll(value, "+", " ")
		out = append(out, Pair{referencePercentDecode(name), referencePercentDecode(value)})
	}
	return out
}

func referencePercentDecode(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if b, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				out = append(out, byte(b))
				i += 2
				continue
			}
		}
		out = append(out, s[i])
	}
	return string(out)
}

// encode is a simple form encoder used to check round trips: it
// percent-encodes every byte but ASCII letters and digits.
func encode(pairs []Pair) string {
	var b strings.Builder
	esc := func(s string) {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
	}
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		esc(p.Name)
		b.WriteByte('=')
		esc(p.Value)
	}
	return b.String()
}

func equalPairs(a, b []Pair) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRoundTrip(t *testing.T) {
	pairs := []Pair{{"", ""}, {"a b", "c+d"}, {"&", "="}, {"%", "%zz"}, {"\xff\x00", "€;"}}
	if got := Parse(encode(pairs)); !equalPairs(got, pairs) {
		t.Fatalf("Parse(encode(%q)) = %q", pairs, got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "a=1&b=2", "a", "a=", "=b", "&&a=1&&", "a=1=2", "a+b=c+d", "a%2Bb=%2b",
		"%zz=%4", "%", "x=%E2%82%AC", "x=%ff", "a;b=c", "a=1&a=2", "%26=%3D", "%%41", "%4%41+",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Parse(s)
		want := referenceParse(s)
		if !equalPairs(got, want) {
			t.Fatalf("Parse(%q) = %q, reference = %q", s, got, want)
		}
		if again := Parse(encode(got)); !equalPairs(again, got) {
			t.Fatalf("Parse(encode(Parse(%q))) = %q, want %q", s, again, got)
		}
		if app := AppendParse([]Pair{{"x", "y"}}, s); len(app) != len(got)+1 || !equalPairs(app[1:], got) {
			t.Fatalf("AppendParse(dst, %q) = %q, want dst + %q", s, app, got)
		}
	})
}

const publishBody = "topic=https%3A%2F%2Fexample.com%2Fbooks%2F1&data=%7B%22status%22%3A%22out%22%7D&private=on"

var sink []Pair

func BenchmarkParse(b *testing.B) {
	b.SetBytes(int64(len(publishBody)))
	b.ReportAllocs()
	for b.Loop() {
		sink = Parse(publishBody)
	}
}

func BenchmarkAppendParse(b *testing.B) {
	cases := []struct{ name, in string }{
		{"PublishBody", publishBody},
		{"Plain", "topic=https://example.com/books/1&data=out&private=on&id=urn:uuid:1234"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]Pair, 0, 8)
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			for b.Loop() {
				dst = AppendParse(dst[:0], c.in)
			}
			sink = dst
		})
	}
}
