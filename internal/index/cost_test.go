package index

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestEstimateCost(t *testing.T) {
	cases := []struct {
		raw    string
		groups int
		// size bounds the estimate from below, where it matters: an
		// expanded repetition must be counted expanded.
		minSize int
	}{
		{"https://example.com/books/:id", 1, 0},
		{"/books/:id/chapters/:c", 2, 0},
		{"https://example.com/a\\:b\\*c", 0, 0},                       // escaped: literal
		{"urn\\:isbn\\:*", 1, 0},                                      // the * is a wildcard
		{"*://*/" + strings.Repeat("*", 20) + "%23i", 22, 0},          // the shape
		{"https://example.com/:id(\\d+)", 2, 0},                       // :name and (regexp)
		{"https://example.com/(a{1000})", 1, 2000},                    // expanded, counted twice
		{"https://example.com/:x(.{1,1000})+", 2, 2000},               // nested optionals
		{"https://example.com/((?:(?:a|b){100}){10})", 1, 4000},       // nested repetition
		{"https://example.com/:café", 1, 0},                           // Unicode name
		{"https://example.com/a:/b", 0, 0},                            // ':' not followed by a name
		{"https://example.com/(a\\)b)", 1, 0},                         // escaped parenthesis inside
		{"https://example.com/{:a}?/{:b}+", 2, 0},                     // modifiers
		{"https://example.com/" + strings.Repeat("a", 2000), 0, 6000}, // literal text
	}
	for _, c := range cases {
		got, err := EstimateCost(c.raw)
		if err != nil {
			t.Errorf("%q: %v", c.raw, err)
			continue
		}
		if got.Groups != c.groups || got.Size < c.minSize {
			t.Errorf("%q: %+v, want %d groups and size ≥ %d", c.raw, got, c.groups, c.minSize)
		}
	}
	for _, raw := range []string{"https://example.com/(a", "https://example.com/()", "https://example.com/(a{2,1})"} {
		if c, err := EstimateCost(raw); !errors.Is(err, ErrPattern) {
			t.Errorf("%q: %+v, %v; want ErrPattern", raw, c, err)
		}
	}
}

// TestEstimateCostAcceptsWhatCompiles checks that the estimate never
// refuses a pattern that the engine compiles, and that it grows with what
// the compiled pattern keeps.
func TestEstimateCostAcceptsWhatCompiles(t *testing.T) {
	_, r := newIndex(t)
	for _, raw := range []string{
		"https://example.com/books/:id", "/books/:id", "books/:id", "urn\\:isbn\\:*", "urn:*",
		"https://*.example.com/:a/:b?x=:c#:d", "https://example.com/:id(\\d+)", "https://example.com/(books|authors)/:id",
		"https://example.com/books{/:id}?", "https://example.com/:x(.{1,100})+", "*://*/*", "https://example.com/café/:x",
		"https://example.com/:a([a-z]{2,8})-:b(\\d{1,4})",
	} {
		p, err := Compile(raw, hubURL, r)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if p.Cost().Size < baseSize {
			t.Errorf("%q: cost %+v below the base", raw, p.Cost())
		}
	}
}

// FuzzEstimateCost checks, on any input, that the estimate takes no
// panic, and that it refuses nothing the engine compiles: a pattern the
// hub could run must get a cost, so that only the limits refuse it.
func FuzzEstimateCost(f *testing.F) {
	for _, s := range []string{"https://example.com/:id(\\d+)", "*://*/*", "(a(?:b)c)", "\\(", ":a:b*(c)", "#*0", "(?:", "a{1,2}"} {
		f.Add(s)
	}
	_, r := newIndex(f)
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 256 {
			return
		}
		c, err := EstimateCost(raw)
		if err != nil {
			if _, cerr := Compile(raw, hubURL, r); cerr == nil {
				// Compile estimates first; but the engine alone must not
				// accept what the estimate refuses.
				t.Fatalf("%q: estimate refused (%v) what compiles", raw, err)
			}
			return
		}
		if c.Size < baseSize || c.Groups < 0 {
			t.Fatalf("%q: %+v", raw, c)
		}
	})
}

func TestCacheCompilesOnceAndEvictsBySize(t *testing.T) {
	_, r := newIndex(t)
	c := NewCache(hubURL, r, 1000)
	lim := Limit{Groups: 8, Size: 1000}
	var wg sync.WaitGroup
	got := make([]*Pattern, 16)
	for i := range got {
		wg.Go(func() {
			p, err := c.Get("https://example.com/books/:id", lim)
			if err != nil {
				t.Error(err)
			}
			got[i] = p
		})
	}
	wg.Wait()
	for _, p := range got[1:] {
		if p != got[0] {
			t.Fatal("concurrent Gets of one pattern returned different compilations")
		}
	}
	if _, err := c.Get("https://example.com/(a", lim); err == nil || c.Len() != 1 {
		t.Fatalf("a pattern that does not compile: err %v, %d kept", err, c.Len())
	}
	// Each of these is over 100 in size: the cache keeps fewer than ten.
	for i := range 20 {
		if _, err := c.Get("https://example.com/"+strings.Repeat("x", i+1)+"/:id", lim); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n == 0 || n >= 10 || c.size > 1000 {
		t.Fatalf("%d patterns kept, size %d: want the most recent within 1000", n, c.size)
	}
	if p, _ := c.Get("https://example.com/books/:id", lim); p == got[0] {
		t.Fatal("the least recently used pattern was not evicted")
	}
}

// The estimate's arithmetic saturates at maxSize, never wraps, where an
// int has 32 bits too: 2*maxSize overflows there.
func TestSaturatingArithmetic(t *testing.T) {
	for _, c := range []struct{ got, want int }{
		{saturatingAdd(maxSize, maxSize), maxSize},
		{saturatingAdd(maxSize-1, 1), maxSize},
		{saturatingAdd(maxSize-2, 1), maxSize - 1},
		{saturatingAdd(0, 0), 0},
		{saturatingMul(2, maxSize), maxSize},
		{saturatingMul(maxSize, maxSize), maxSize},
		{saturatingMul(1<<15, 1<<15), maxSize},
		{saturatingMul(1<<14, 1<<15), maxSize / 2},
		{saturatingMul(0, maxSize), 0},
	} {
		if c.got != c.want {
			t.Errorf("got %d, want %d", c.got, c.want)
		}
	}
}
