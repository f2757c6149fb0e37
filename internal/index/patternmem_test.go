package index

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// distinctPatterns returns n distinct patterns of the shapes that apps
// give each user: a per-user wildcard, a named group with a per-user
// literal tail, and a relative pattern resolved against the hub URL.
func distinctPatterns(n int) []string {
	raws := make([]string, n)
	for i := range raws {
		switch i % 3 {
		case 0:
			raws[i] = fmt.Sprintf("https://example.com/users/%d/{*}", i)
		case 1:
			raws[i] = fmt.Sprintf("https://example.com/users/:id/books/%d", i)
		default:
			raws[i] = fmt.Sprintf("/chats/%d/messages/:m", i)
		}
	}
	return raws
}

// heapPerPattern compiles raws and returns the live heap bytes they keep,
// per pattern.
func heapPerPattern(tb testing.TB, raws []string) float64 {
	tb.Helper()
	_, r := newIndex(tb)
	return float64(heapKept(raws, func(raw string) *Pattern { return mustCompile(tb, raw, r) })) / float64(len(raws))
}

// heapKept compiles raws with compile and returns the live heap bytes
// the patterns keep: the difference of HeapAlloc after a collection
// before and after, with the patterns kept alive.
func heapKept(raws []string, compile func(raw string) *Pattern) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pats := make([]*Pattern, len(raws))
	for i, raw := range raws {
		pats[i] = compile(raw)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(pats)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// costBoundsN is how many distinct patterns of each shape checkCostBounds
// compiles: enough that the heap they keep (hundreds of kilobytes to
// megabytes) dwarfs what else the process allocates meanwhile. Fewer can
// only raise the figure: what the patterns share is spread over fewer.
const costBoundsN = 500

// maxHeapPerUnit is the most live heap, in bytes, that a compiled URL
// pattern or URI template may keep per unit of its Cost.Size (the
// documentation says about 50).
const maxHeapPerUnit = 64

// checkCostBounds compiles costBoundsN distinct patterns of each shape
// (the i-th of a shape is shape(i)) with compile, and fails t when the
// live heap they keep passes maxHeapPerUnit per unit of the Cost.Size
// that size gives them.
func checkCostBounds(t *testing.T, shapes map[string]func(i int) string, size func(raw string) int, compile func(raw string) *Pattern) {
	t.Helper()
	for name, shape := range shapes {
		raws := make([]string, costBoundsN)
		units := 0
		for i := range raws {
			raws[i] = shape(i)
			units += size(raws[i])
		}
		perUnit := float64(heapKept(raws, compile)) / float64(units)
		t.Logf("%-17s %5.1f heap bytes per unit of Cost.Size", name, perUnit)
		if perUnit > maxHeapPerUnit {
			t.Errorf("%s: %.1f heap bytes per unit of Cost.Size, over %d", name, perUnit, maxHeapPerUnit)
		}
	}
}

// BenchmarkCompileDistinct compiles distinct patterns and reports the heap
// each keeps, as "retained-B/pattern".
func BenchmarkCompileDistinct(b *testing.B) {
	_, r := newIndex(b)
	raws := distinctPatterns(3000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := Compile(raws[i%len(raws)], hubURL, r); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	b.ReportMetric(heapPerPattern(b, raws), "retained-B/pattern")
}

// BenchmarkTest evaluates distinct patterns against resolved topics, half
// of which match.
func BenchmarkTest(b *testing.B) {
	_, r := newIndex(b)
	raws := distinctPatterns(300)
	pats := make([]*Pattern, len(raws))
	hrefs := make([]string, 2*len(raws))
	for i, raw := range raws {
		pats[i] = mustCompile(b, raw, r)
		var topic string
		switch i % 3 {
		case 0:
			topic = fmt.Sprintf("https://example.com/users/%d/x/y", i)
		case 1:
			topic = fmt.Sprintf("https://example.com/users/7/books/%d", i)
		default:
			topic = fmt.Sprintf("/chats/%d/messages/1?x=y", i)
		}
		u, ok := r.Resolve(topic)
		if !ok || !pats[i].Test(u.Href) {
			b.Fatalf("%q does not match %q", raw, topic)
		}
		hrefs[2*i] = u.Href
		hrefs[2*i+1] = u.Href + "/no"
	}
	i := 0
	for b.Loop() {
		pats[i/2%len(pats)].Test(hrefs[i%len(hrefs)])
		i++
	}
}

// TestCostBounds checks that Cost.Size bounds the heap a compiled
// pattern keeps, at the rate its documentation gives, for shapes that
// share their regular expressions and for shapes that keep their own.
func TestCostBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap of thousands of patterns")
	}
	shapes := map[string]func(i int) string{
		"per-user wildcard": func(i int) string { return fmt.Sprintf("https://example.com/users/%d/{*}", i) },
		"per-user suffix":   func(i int) string { return fmt.Sprintf("https://example.com/users/:id/books/%d", i) },
		"relative":          func(i int) string { return fmt.Sprintf("/chats/%d/messages/:m", i) },
		"literal between":   func(i int) string { return fmt.Sprintf("https://example.com/:a/%d%s/:b", i, strings.Repeat("x", 200)) },
		"custom regexp":     func(i int) string { return fmt.Sprintf("https://example.com/:a(a%d|b+)", i) },
		"wildcard host":     func(i int) string { return fmt.Sprintf("https://*.example.com/%d/:a/:b/:c", i) },
	}
	_, r := newIndex(t)
	checkCostBounds(t, shapes, func(raw string) int {
		c, err := EstimateCost(raw)
		if err != nil {
			t.Fatal(err)
		}
		return c.Size
	}, func(raw string) *Pattern { return mustCompile(t, raw, r) })
}
