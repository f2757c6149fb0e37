package chars

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// reference is a deliberately simple restatement of TOP-1 used to check Valid.
func reference(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r <= 0x1F, r == 0x7F, r >= 0x80 && r <= 0x9F:
			return false
		case isCf(r):
			return false
		}
	}
	return true
}

func TestValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		// Accepted.
		{"empty", "", true},
		{"url", "https://example.com/books/1", true},
		{"uri template", "https://example.com/books/{id}", true},
		{"space", "a b", true},
		{"all printable ASCII", printableASCII(), true},
		{"tilde at end", "abcdefgh~", true},
		{"latin-1", "café", true},
		{"nbsp U+00A0", "a\u00a0b", true},
		{"U+00AC before soft hyphen", "\u00ac", true},
		{"U+00AE after soft hyphen", "\u00ae", true},
		{"emoji", "https://example.com/😀", true},
		{"emoji with variation selector", "❤️", true},
		{"CJK", "https://例子.测试/书/1", true},
		{"arabic", "https://example.com/كتاب", true},
		{"genuine U+FFFD", "a\uFFFDb", true},
		{"noncharacter U+FFFE", "\uFFFE", true},
		{"private use U+E000", "\uE000", true},
		{"supplementary private use", "\U00100000", true},
		{"line separator U+2028 (Zl)", "\u2028", true},
		{"max rune", "\U0010FFFF", true},
		{"long ASCII", strings.Repeat("abcdefghij", 100), true},

		// C0 controls.
		{"U+0000", "\x00", false},
		{"U+0000 inside", "https://example.com/\x00books", false},
		{"U+0001", "\x01", false},
		{"tab U+0009", "a\tb", false},
		{"newline U+000A", "a\nb", false},
		{"carriage return U+000D", "a\rb", false},
		{"U+001F", "\x1f", false},
		{"U+001F after 8 ASCII bytes", "abcdefgh\x1f", false},
		{"U+001F in second word", "abcdefghijklmno\x1f", false},

		// DEL.
		{"U+007F", "\x7f", false},
		{"U+007F in word", "abc\x7fdefgh", false},

		// C1 controls.
		{"U+0080", "\u0080", false},
		{"U+0085 NEL", "a\u0085b", false},
		{"U+009F", "\u009f", false},
		{"U+009F after ASCII", "abcdefgh\u009f", false},

		// Cf.
		{"U+00AD soft hyphen", "a\u00adb", false},
		{"U+0600", "\u0600", false},
		{"U+061C", "\u061c", false},
		{"U+200B zero width space", "a\u200bb", false},
		{"U+200C ZWNJ", "\u200c", false},
		{"U+200D ZWJ", "\u200d", false},
		{"U+200E LRM", "\u200e", false},
		{"U+202E RLO", "https://example.com/\u202egpj.exe", false},
		{"U+2066 LRI", "\u2066", false},
		{"U+2069 PDI", "\u2069", false},
		{"U+FEFF BOM", "\ufeffhttps://example.com", false},
		{"U+FFFB", "\ufffb", false},
		{"U+E0001 language tag", "\U000E0001", false},
		{"U+E0041 tag latin capital A", "x\U000E0041", false},
		{"emoji with ZWJ sequence", "🏳️‍🌈", false},

		// Invalid UTF-8.
		{"0xff", "\xff", false},
		{"0xff after ASCII", "abcdefgh\xff", false},
		{"0x80 continuation alone", "\x80", false},
		{"truncated sequence", "\xe2\x82", false},
		{"lone surrogate U+D800", "\xed\xa0\x80", false},
		{"lone surrogate U+DFFF", "\xed\xbf\xbf", false},
		{"overlong NUL", "\xc0\x80", false},
		{"overlong slash", "\xe0\x80\xaf", false},
		{"beyond U+10FFFF", "\xf4\x90\x80\x80", false},
	}
	for _, tt := range tests {
		if got := Valid(tt.in); got != tt.want {
			t.Errorf("%s: Valid(%+q) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
		if got := reference(tt.in); got != tt.want {
			t.Errorf("%s: reference(%+q) = %v, want %v (test table is wrong?)", tt.name, tt.in, got, tt.want)
		}
	}
}

func printableASCII() string {
	var b strings.Builder
	for c := byte(0x20); c <= 0x7E; c++ {
		b.WriteByte(c)
	}
	return b.String()
}

// TestCfRanges checks both ends of every Unicode 17.0 Cf range, and the code
// point just outside each end, which is never banned. The literal values are
// taken from DerivedGeneralCategory-17.0.0.txt (see cf17).
func TestCfRanges(t *testing.T) {
	ranges := []struct{ lo, hi rune }{
		{0x00AD, 0x00AD}, {0x0600, 0x0605}, {0x061C, 0x061C}, {0x06DD, 0x06DD},
		{0x070F, 0x070F}, {0x0890, 0x0891}, {0x08E2, 0x08E2}, {0x180E, 0x180E},
		{0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x2064}, {0x2066, 0x206F},
		{0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}, {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
		{0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
		{0xE0020, 0xE007F},
	}
	total := 0
	for _, rg := range ranges {
		total += int(rg.hi-rg.lo) + 1
		for _, r := range []rune{rg.lo, rg.hi} {
			if Valid(string(r)) {
				t.Errorf("Valid(%U) = true, want false (Cf)", r)
			}
			if Valid("topic/" + string(r) + "/x") {
				t.Errorf("Valid(topic with %U) = true, want false (Cf)", r)
			}
		}
		for _, r := range []rune{rg.lo - 1, rg.hi + 1} {
			if !Valid(string(r)) {
				t.Errorf("Valid(%U) = false, want true (adjacent to Cf range %U..%U)", r, rg.lo, rg.hi)
			}
		}
	}
	if total != 170 {
		t.Errorf("Unicode 17.0 Cf has 170 code points, the test table has %d", total)
	}
	if len(cf17) != len(ranges) {
		t.Fatalf("cf17 has %d ranges, want %d", len(cf17), len(ranges))
	}
	for i, rg := range ranges {
		if cf17[i].lo != rg.lo || cf17[i].hi != rg.hi {
			t.Errorf("cf17[%d] = %U..%U, want %U..%U", i, cf17[i].lo, cf17[i].hi, rg.lo, rg.hi)
		}
	}
}

// TestCfMatchesStdlib checks the pinned Unicode 17.0 Cf table against the
// standard library's table for Unicode versions known to have the same Cf set
// (15.0.0 through 17.0.0: no Cf code point was added or recategorised since
// 15.0). On a toolchain with another Unicode version the test is skipped: the
// table stays pinned to 17.0 by design.
func TestCfMatchesStdlib(t *testing.T) {
	switch unicode.Version {
	case "15.0.0", "15.1.0", "16.0.0", "17.0.0":
	default:
		t.Skipf("unicode.Version = %s; Cf equality only established for 15.0.0..17.0.0", unicode.Version)
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := isCf(r), unicode.Is(unicode.Cf, r); got != want {
			t.Errorf("isCf(%U) = %v, unicode.Is(unicode.Cf) = %v", r, got, want)
		}
	}
}

// TestEveryCodePoint checks Valid on every scalar value, alone and embedded in
// ASCII at offsets that exercise the word-at-a-time path.
func TestEveryCodePoint(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // not encodable; string(r) would be U+FFFD
		}
		want := !(r <= 0x1F || r == 0x7F || (r >= 0x80 && r <= 0x9F) || unicode.Is(unicode.Cf, r))
		s := string(r)
		if got := Valid(s); got != want {
			t.Fatalf("Valid(%U) = %v, want %v", r, got, want)
		}
		if r < 0x3000 || r%97 == 0 {
			for _, pad := range []string{"abcdefg", "abcdefgh", "abcdefghijklmnop"} {
				if got := Valid(pad + s + pad); got != want {
					t.Fatalf("Valid(%q+%U+%q) = %v, want %v", pad, r, pad, got, want)
				}
			}
		}
	}
}

// TestASCIIBytes checks every single byte at every position of a 17-byte
// string, so each lane of the word-at-a-time check is covered.
func TestASCIIBytes(t *testing.T) {
	base := []byte("abcdefghijklmnopq")
	for c := 0; c < 0x80; c++ {
		want := c >= 0x20 && c != 0x7F
		for i := range base {
			b := append([]byte(nil), base...)
			b[i] = byte(c)
			if got := Valid(string(b)); got != want {
				t.Fatalf("Valid(%q) = %v, want %v", b, got, want)
			}
		}
	}
	for c := 0x80; c < 0x100; c++ {
		for i := range base {
			b := append([]byte(nil), base...)
			b[i] = byte(c)
			if Valid(string(b)) {
				t.Fatalf("Valid(%q) = true, want false (stray byte %#x)", b, c)
			}
		}
	}
}

func TestValidAllocs(t *testing.T) {
	ascii := "https://example.com/books/1234?page=2&x=y"
	other := "https://example.com/livres/café/書籍/😀"
	if n := testing.AllocsPerRun(100, func() { Valid(ascii); Valid(other) }); n != 0 {
		t.Errorf("Valid allocates %v times, want 0", n)
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{"", "https://example.com/books/1", "café", "a\u200bb", "\xed\xa0\x80", "\xff", "abcdefgh\x7f", "\U000E0001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Valid(s), reference(s); got != want {
			t.Errorf("Valid(%+q) = %v, reference = %v", s, got, want)
		}
	})
}

var sink bool

func BenchmarkValid(b *testing.B) {
	cases := []struct{ name, s string }{
		{"ASCII-URL", "https://example.com/books/1234/reviews/5"},        // 40 bytes
		{"NonASCII-URL", "https://example.com/livres/café/書籍/😀/ünïcödé"}, // mixed
		{"CJK", "https://例子.测试/书籍/作者/出版社/一二三四五"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			b.ReportAllocs()
			for b.Loop() {
				sink = Valid(c.s)
			}
			if !sink {
				b.Fatal("unexpectedly invalid")
			}
		})
	}
}
