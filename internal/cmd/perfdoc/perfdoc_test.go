package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseRunName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, hub, id string
		ok            bool
	}{
		{"default-fanout-1000-1.json", "default", "1", true},
		{"broadcaster-selective-urlpattern-10000-b.json", "broadcaster", "b", true},
		{"default-fanout-1000.json", "", "", false},         // no run
		{"default-fanout-many-1.json", "", "", false},       // S is not a number
		{"default-fanout-1000-1.jsonl", "", "", false},      // not .json
		{"-fanout-1000-1.json", "", "", false},              // no hub
		{"default-fanout-1000-.json", "", "", false},        // empty run
		{"default-fanout-1000-1-extra.json", "", "", false}, // S is "1"? no: "1" is S, "extra" the run
	} {
		hub, id, err := parseRunName(tc.name)
		if tc.name == "default-fanout-1000-1-extra.json" {
			// <hub>-<scenario with dashes>-<S>-<run>: scenario "fanout-1000", S 1.
			if err != nil || hub != "default" || id != "extra" {
				t.Errorf("%s: got %q %q %v", tc.name, hub, id, err)
			}
			continue
		}
		if (err == nil) != tc.ok || hub != tc.hub || id != tc.id {
			t.Errorf("%s: got %q %q %v, want %q %q ok=%v", tc.name, hub, id, err, tc.hub, tc.id, tc.ok)
		}
	}
}

// loadgenJSON returns a loadgen output holding one fanout result.
func loadgenJSON(subs int, cpuPct, windowS float64, delivered int64, bytesPerSub float64) []byte {
	b, _ := json.Marshal(map[string]any{
		"loadgen": map[string]any{"hub": "/tmp/perf/standalone", "reader": "epoll"},
		"results": []map[string]any{{
			"scenario": "fanout", "subs": subs, "pubs": 100, "delivered": delivered, "expected": delivered,
			"hub_cpu_pct": cpuPct, "window_s": windowS, "bytes_per_sub": bytesPerSub,
			"deliveries_per_s": float64(delivered) / windowS, "lat_p50_ms": 1.5,
		}},
	})
	return b
}

func TestParseLoadgen(t *testing.T) {
	t.Parallel()
	runs, err := parseLoadgen("default-fanout-1000-2.json", loadgenJSON(1000, 80, 2.5, 4_000_000, 1977))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	r := runs[0]
	// 80 % of 2.5 s is 2 s of CPU over 4 M deliveries: 0.5 µs each.
	if r.Hub != "default" || r.ID != "2" || r.Scenario != "fanout" || r.Subs != 1000 ||
		math.Abs(r.CPUPerDeliveryUs-0.5) > 1e-12 || r.BytesPerSub != 1977 {
		t.Errorf("got %+v", r)
	}

	for name, b := range map[string][]byte{
		"hub died":       []byte(`{"results":[{"scenario":"fanout","subs":10,"delivered":5,"window_s":1,"hub_died":true}]}`),
		"no delivery":    loadgenJSON(1000, 80, 2.5, 0, 1977),
		"note":           []byte(`{"results":[{"scenario":"fanout","subs":10,"delivered":5,"window_s":1,"note":"connect: refused"}]}`),
		"no results":     []byte(`{"loadgen":{},"results":[]}`),
		"not JSON":       []byte(`loadgen: hub exited`),
		"a bad run name": loadgenJSON(1000, 80, 2.5, 4_000_000, 1977),
	} {
		file := "default-fanout-10-1.json"
		if name == "a bad run name" {
			file = "default.json"
		}
		if _, err := parseLoadgen(file, b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseSidecar(t *testing.T) {
	t.Parallel()
	commit, date, load := parseSidecar([]byte("commit 0cd155e\ndate 2026-12-06T12:43Z\n" +
		"before  12:43:54 up  7:56,  0 user,  load average: 1.58, 2.35, 2.96\n" +
		"after  12:44:12 up  7:56,  2 users,  load average: 12.50, 2.33, 2.94\n"))
	if commit != "0cd155e" || date != "2026-12-06T12:43Z" || !slices.Equal(load, []float64{1.58, 12.5}) {
		t.Errorf("got %q %q %v", commit, date, load)
	}
	if commit, date, load := parseSidecar(nil); commit != "" || date != "" || load != nil {
		t.Errorf("no sidecar: got %q %q %v", commit, date, load)
	}
}

func TestReadSim(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/sim-sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := readSim(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 9 {
		t.Fatalf("%d rows, want 9 (the blank line skipped)", len(rows))
	}
	r := rows[2]
	if r.Scenario != "fanout" || r.Subs != 1_000_000 || r.HeapPerSubB != 781 || r.CPUPerDeliveryUs != 0.22 ||
		r.Deliveries != 20_000_000 || r.GoVersion != "go1.26.8" || r.GOMAXPROCS != 2 || r.Date != "2026-12-06" {
		t.Errorf("row 3: %+v", r)
	}

	for _, tc := range []struct{ in, err string }{
		{`{"scenario":"fanout","subs":10}` + "\n" + `{"scenario":`, "line 2"},
		{`{"subs":10}`, "line 1: want a scenario"},
		{`{"scenario":"exact","subs":0}`, "line 1: want a scenario and subs > 0"},
	} {
		_, err := readSim(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []float64
		want summary
	}{
		{nil, summary{}},
		{[]float64{3}, summary{3, 3, 3, 1}},
		{[]float64{5, 1, 3}, summary{1, 3, 5, 3}},
		{[]float64{4, 1, 2, 10}, summary{1, 3, 10, 4}}, // even: mean of the middle two
		{[]float64{2, 2}, summary{2, 2, 2, 2}},
	} {
		in := slices.Clone(tc.in)
		if got := summarize(in); got != tc.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("summarize(%v) reordered its argument: %v", tc.in, in)
		}
	}
}

func TestGroup(t *testing.T) {
	t.Parallel()
	runs := []run{
		{Hub: "broadcaster", Subs: 1000, CPUPerDeliveryUs: 5},
		{Hub: "zeta", Subs: 1000, CPUPerDeliveryUs: 9},
		{Hub: "default", Subs: 10000, CPUPerDeliveryUs: 0.5},
		{Hub: "default", Subs: 1000, CPUPerDeliveryUs: 0.4},
		{Hub: "default", Subs: 1000, CPUPerDeliveryUs: 0.6},
		{Hub: "default", Subs: 1000, CPUPerDeliveryUs: 2},
		{Hub: "goroutine", Subs: 1000, CPUPerDeliveryUs: -1}, // no value: left out
	}
	ss := group(runs, func(r run) string { return r.Hub }, func(r run) int { return r.Subs },
		func(r run) (float64, bool) { return r.CPUPerDeliveryUs, r.CPUPerDeliveryUs > 0 })
	want := []series{
		{"default", []point{{1000, summary{0.4, 0.6, 2, 3}}, {10000, summary{0.5, 0.5, 0.5, 1}}}},
		{"broadcaster", []point{{1000, summary{5, 5, 5, 1}}}},
		{"zeta", []point{{1000, summary{9, 9, 9, 1}}}},
	}
	if fmt.Sprint(ss) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", ss, want)
	}
	if got := xs(ss); !slices.Equal(got, []float64{1000, 10000}) {
		t.Errorf("xs = %v", got)
	}
}

func TestFormatting(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1 000", 19000: "19 000", 1234567.4: "1 234 567", -25200: "-25 200"} {
		if got := groupDigits(v); got != want {
			t.Errorf("groupDigits(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{0.456: "0.46", 4.2: "4.20", 12.34: "12.3", 1977.2: "1 977"} {
		if got := figure(v); got != want {
			t.Errorf("figure(%v) = %q, want %q", v, got, want)
		}
	}
	if got := cell(summary{0.4, 0.5, 0.61, 3}, " µs"); got != "0.50 µs (0.40–0.61)" {
		t.Errorf("cell = %q", got)
	}
	if got := cell(summary{0.5, 0.5, 0.5, 2}, " µs"); got != "0.50 µs" {
		t.Errorf("cell without spread = %q", got)
	}
	for v, want := range map[float64]string{0.2: "0.2", 5: "5", 500: "500", 2000: "2k", 20000: "20k", 1e6: "1M", 1.5e6: "1.5M"} {
		if got := tickLabel(v); got != want {
			t.Errorf("tickLabel(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestLogAxisTicks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lo, hi float64
		want   []float64
	}{
		{900, 21000, []float64{1000, 2000, 3000, 5000, 10000, 20000}}, // a little more than a decade
		{8000, 1.2e6, []float64{1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6}},
		{0.25, 6, []float64{0.3, 0.5, 1, 2, 3, 5}},    // a little more than a decade
		{1.5, 7.5, []float64{2, 3, 4, 5, 6, 7}},       // less than a decade
		{0.02, 3e3, []float64{0.1, 1, 10, 100, 1000}}, // many decades: powers of ten
		{0.09, 2e3, []float64{0.1, 1, 10, 100, 1000}},
	} {
		a := logAxis{tc.lo, tc.hi}
		if got := a.ticks(); !slices.Equal(got, tc.want) {
			t.Errorf("ticks of [%v, %v] = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
	// Positions: the ends map to the ends, and each decade is as long.
	a := logAxis{100, 100000}
	if p := a.pos(100, 80, 580); p != 80 {
		t.Errorf("pos(lo) = %v", p)
	}
	if p := a.pos(100000, 80, 580); math.Abs(p-580) > 1e-9 {
		t.Errorf("pos(hi) = %v", p)
	}
	d1 := a.pos(1000, 0, 300) - a.pos(100, 0, 300)
	d2 := a.pos(10000, 0, 300) - a.pos(1000, 0, 300)
	if math.Abs(d1-100) > 1e-9 || math.Abs(d2-100) > 1e-9 {
		t.Errorf("decades %v and %v long, want 100", d1, d2)
	}
	// newLogAxis leaves a margin around the data.
	b := newLogAxis(1000, 19000)
	if b.lo >= 1000 || b.hi <= 19000 {
		t.Errorf("newLogAxis(1000, 19000) = %+v", b)
	}
	if c := newLogAxis(5, 5); c.lo >= 5 || c.hi <= 5 {
		t.Errorf("newLogAxis(5, 5) = %+v", c)
	}
}

// samplePlot has two series, one with a spread, one point not positive.
func samplePlot() plot {
	return plot{
		Title: "Hub CPU per delivery <saturated>", Subtitle: "loadgen & co", XLabel: "subscribers (S)",
		YLabel: "µs per delivery", YUnit: "µs",
		Series: []series{
			{"mercure", []point{{1000, summary{0.4, 0.5, 0.7, 3}}, {19000, summary{0.3, 0.3, 0.3, 1}}}},
			{"broadcaster", []point{{1000, summary{4, 4.5, 5, 2}}, {5000, summary{0, 0, 0, 1}}, {19000, summary{6, 6, 6, 1}}}},
		},
	}
}

var translateRE = regexp.MustCompile(`^translate\(([-0-9.]+) ([-0-9.]+)\)$`)

func TestSVG(t *testing.T) {
	t.Parallel()
	b, err := samplePlot().SVG()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := samplePlot().SVG()
	if !bytes.Equal(b, again) {
		t.Error("two renderings of one plot differ")
	}

	// Well-formed XML; every median marker lands in the plot area.
	dec := xml.NewDecoder(bytes.NewReader(b))
	var points int
	var texts []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, b)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if attr(el, "class") != "pt" {
				continue
			}
			m := translateRE.FindStringSubmatch(attr(el, "transform"))
			if m == nil {
				t.Fatalf("point without a translation: %v", el)
			}
			x, _ := strconv.ParseFloat(m[1], 64)
			y, _ := strconv.ParseFloat(m[2], 64)
			if x < areaLeft || x > areaRight || y < areaTop || y > areaBottom {
				t.Errorf("point (%v, %v) outside the plot area", x, y)
			}
			points++
		case xml.CharData:
			if s := strings.TrimSpace(string(el)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if points != 4 { // the zero is left out
		t.Errorf("%d points, want 4", points)
	}
	for _, want := range []string{"Hub CPU per delivery <saturated>", "loadgen & co", "subscribers (S)", "µs per delivery",
		"mercure", "broadcaster", "1k", "2k", "5k", "10k", "points: median of the runs",
		"mercure, S = 1 000: 0.50 µs (median of 3, 0.40–0.70)"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in %q", want, texts)
		}
	}

	// A hub keeps its color whichever hubs a plot shows.
	if styleOf(hubName("broadcaster"), 0) != styleOf(hubName("broadcaster"), 2) || styleOf(hubName("default"), 1) == styleOf(hubName("broadcaster"), 1) {
		t.Error("hub styles depend on the series' order")
	}

	if _, err := (plot{Title: "empty", Series: []series{{"a", []point{{1000, summary{}}}}}}).SVG(); err == nil {
		t.Error("a plot with nothing to show: no error")
	}
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func TestReplaceBlock(t *testing.T) {
	t.Parallel()
	doc := "# Title\n\nbefore\n<!-- perfdoc:begin t -->\nold\ntable\n<!-- perfdoc:end t -->\nafter\n"
	got, err := replaceBlock([]byte(doc), "t", "| a |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nbefore\n<!-- perfdoc:begin t -->\n| a |\n<!-- perfdoc:end t -->\nafter\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	again, err := replaceBlock(got, "t", "| a |")
	if err != nil || string(again) != want {
		t.Errorf("not idempotent (or the missing newline not added):\n%s %v", again, err)
	}
	empty, _ := replaceBlock([]byte("<!-- perfdoc:begin t --><!-- perfdoc:end t -->"), "t", "x\n")
	if string(empty) != "<!-- perfdoc:begin t -->\nx\n<!-- perfdoc:end t -->" {
		t.Errorf("markers on one line: %q", empty)
	}

	for name, doc := range map[string]string{
		"no markers":   "# Title\n",
		"no end":       "<!-- perfdoc:begin t -->\n",
		"no begin":     "<!-- perfdoc:end t -->\n",
		"two blocks":   strings.Repeat("<!-- perfdoc:begin t -->\n<!-- perfdoc:end t -->\n", 2),
		"out of order": "<!-- perfdoc:end t -->\n<!-- perfdoc:begin t -->\n",
		"other block":  "<!-- perfdoc:begin u -->\n<!-- perfdoc:end u -->\n",
	} {
		if _, err := replaceBlock([]byte(doc), "t", "x\n"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRewrite(t *testing.T) {
	t.Parallel()
	doc := []byte("a\n<!-- perfdoc:begin x -->\n<!-- perfdoc:end x -->\nb\n<!-- perfdoc:begin y -->\n<!-- perfdoc:end y -->\n")
	got, err := rewrite(doc, map[string]string{"x": "X\n", "y": "Y\n"})
	if err != nil || string(got) != "a\n<!-- perfdoc:begin x -->\nX\n<!-- perfdoc:end x -->\nb\n<!-- perfdoc:begin y -->\nY\n<!-- perfdoc:end y -->\n" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := rewrite(doc, map[string]string{"x": "X\n"}); err == nil || !strings.Contains(err.Error(), `no block "y"`) {
		t.Errorf("a block perfdoc does not make: %v", err)
	}
	if _, err := rewrite(doc, map[string]string{"x": "X\n", "y": "Y\n", "z": "Z\n"}); err == nil || !strings.Contains(err.Error(), `"z"`) {
		t.Errorf("a block without markers: %v", err)
	}
}

// testDoc is a markdown file with every block perfdoc makes.
const testDoc = "# Performance\n\nHand-written.\n\n" +
	"<!-- perfdoc:begin fanout -->\n<!-- perfdoc:end fanout -->\n\nRuns:\n\n" +
	"<!-- perfdoc:begin fanout-runs -->\n<!-- perfdoc:end fanout-runs -->\n\n" +
	"<!-- perfdoc:begin streams -->\n<!-- perfdoc:end streams -->\n\n" +
	"<!-- perfdoc:begin sim -->\n<!-- perfdoc:end sim -->\n\nThe end.\n"

// testTree writes a docs directory with loadgen runs (and streambench
// runs and the sample simulation if optional) and returns the results'
// directory and the doc.
func testTree(t *testing.T, optional bool) (dir, doc string) {
	root := t.TempDir()
	dir = filepath.Join(root, "docs", "perf")
	doc = filepath.Join(root, "docs", "performance.md")
	if err := os.MkdirAll(filepath.Join(dir, "loadgen"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(doc, []byte(testDoc))
	for _, r := range []struct {
		name       string
		subs       int
		cpu, bytes float64 // µs per delivery, B per subscriber
	}{
		{"default-fanout-1000-1", 1000, 0.5, 6000},
		{"default-fanout-1000-2", 1000, 0.4, 6400},
		{"broadcaster-fanout-1000-1", 1000, 5, 26000},
		{"default-fanout-10000-1", 10000, 0.3, 2000},
		{"broadcaster-fanout-10000-1", 10000, 6, 25000},
		{"broadcaster-fanout-10000-2", 10000, 7, 25100},
	} {
		write(filepath.Join(dir, "loadgen", r.name+".json"), loadgenJSON(r.subs, 100, r.cpu*1e-3, 1000, r.bytes))
		write(filepath.Join(dir, "loadgen", r.name+".uptime"), []byte("commit abc1234\ndate 2026-12-06\nbefore 12:00 up 1 day, load average: 1.00, 2, 3\nafter 12:01 up 1 day, load average: 2.50, 2, 3\n"))
	}
	if optional {
		if err := os.Mkdir(filepath.Join(dir, "streambench"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, r := range map[string]string{
			"idle-h1-2000-1":     `{"proto":"h1","n":2000,"rss_per_stream_b":4100,"heap_per_stream_b":1230,"stack_per_stream_b":160,"goroutines":14,"deliveries":200000,"cpu_per_delivery_us":6.7}`,
			"idle-h1-2000-2":     `{"proto":"h1","n":2000,"rss_per_stream_b":4300,"heap_per_stream_b":1232,"stack_per_stream_b":160,"goroutines":14,"deliveries":200000,"cpu_per_delivery_us":8.5}`,
			"idle-h2-2000-1":     `{"proto":"h2","n":2000,"rss_per_stream_b":65700,"heap_per_stream_b":23600,"stack_per_stream_b":28700,"goroutines":6010}`,
			"idle-h1-tls-2000-1": `{"proto":"h1-tls","n":2000,"rss_per_stream_b":16300,"heap_per_stream_b":7800,"stack_per_stream_b":20,"goroutines":14,"cpu_per_delivery_us":7.4}`,
		} {
			write(filepath.Join(dir, "streambench", name+".json"), []byte(r))
		}
		write(filepath.Join(dir, "streambench", "idle-h2-2000-1.uptime"), []byte("before x load average: 5.00, 1, 1\nafter x load average: 4.50, 1, 1\n"))
		b, err := os.ReadFile("testdata/sim-sample.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(dir, "sim.jsonl"), b)
	}
	return dir, doc
}

func TestBuild(t *testing.T) {
	t.Parallel()
	dir, doc := testTree(t, true)
	var log bytes.Buffer
	outs, err := build(dir, doc, &log)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range outs {
		names = append(names, filepath.Base(o.path))
	}
	if want := []string{"performance.md", cpuSVG, rssSVG, simHeapSVG, simCPUSVG}; !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(want))) {
		t.Errorf("outputs %v, want %v", names, want)
	}
	md := string(outs[0].data)
	for _, want := range []string{
		"# Performance\n\nHand-written.\n\n<!-- perfdoc:begin fanout -->\n![Hub CPU per delivery against S, per hub](perf/cpu-per-delivery.svg)\n",
		"| S | mercure (default engine) | broadcaster | default / broadcaster | load average |\n| --- | --- | --- | --- | --- |\n" +
			"| 1 000 | 0.45 µs (0.40–0.50) | 5.00 µs | 0.09 | 1.0–2.5 |\n| 10 000 | 0.30 µs | 6.50 µs (6.00–7.00) | 0.05 | 1.0–2.5 |\n",
		"| 1 000 | 6 200 B (6 000–6 400) | 26 000 B | 0.24 | 1.0–2.5 |\n",
		"| mercure (default engine) | 1 000 | 2 | 0.40 µs | 6 400 B | 2 500 000 | 0 | 1.00, 2.50 | abc1234 | 2026-12-06 |\n",
		"![Heap per subscriber against S, simulated](perf/sim-heap-per-sub.svg)",
		"| urlpattern | 100 000 | 3 050 B | 0 B | 12 | 9.90 / — µs | 910 µs | 910 µs | 10 000 | 12.0 s | — / — ms | — ms/s | — s |\n",
		"go1.26.8, GOMAXPROCS 2, 2026-12-06.\n<!-- perfdoc:end sim -->\n\nThe end.\n",
		"<!-- perfdoc:begin streams -->\n" +
			"| streams | n | RSS per stream | live heap per stream | goroutine stacks per stream | goroutines | hub CPU per delivery | runs | load average |\n" +
			"| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" +
			"| HTTP/1.1, plain | 2 000 | 4 200 B (4 100–4 300) | 1 231 B (1 230–1 232) | 160 B | 14 | 7.60 µs (6.70–8.50) | 2 | — |\n" +
			"| HTTP/1.1 over TLS | 2 000 | 16 300 B | 7 800 B | 20 B | 14 | 7.40 µs | 1 | — |\n" +
			"| HTTP/2 over TLS | 2 000 | 65 700 B | 23 600 B | 28 700 B | 6 010 | — | 1 | 4.5–5.0 |\n" +
			"<!-- perfdoc:end streams -->\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the doc lacks\n%s\nin\n%s", want, md)
		}
	}
	if log.Len() != 0 {
		t.Errorf("log: %s", log.String())
	}

	// Written, then built again: the same bytes, and -check finds nothing stale.
	for _, o := range outs {
		if err := os.WriteFile(o.path, o.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	again, err := build(dir, doc, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if stale, err := compare(again); err != nil || len(stale) != 0 {
		t.Errorf("after writing, stale: %v %v", stale, err)
	}
	// A new run makes the doc and the plots stale.
	if err := os.WriteFile(filepath.Join(dir, "loadgen", "default-fanout-10000-2.json"), loadgenJSON(10000, 100, 0.0009, 1000, 1900), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := build(dir, doc, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := compare(changed)
	if err != nil || !slices.Equal(stale, []string{doc, filepath.Join(dir, cpuSVG), filepath.Join(dir, rssSVG)}) {
		t.Errorf("after a new run, stale: %v %v", stale, err)
	}
}

func TestBuildWithoutSimulation(t *testing.T) {
	t.Parallel()
	dir, doc := testTree(t, false)
	var log bytes.Buffer
	outs, err := build(dir, doc, &log)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 3 {
		t.Errorf("%d outputs, want the doc and two plots", len(outs))
	}
	if !strings.Contains(log.String(), "sim.jsonl is absent") || !strings.Contains(log.String(), "no results in") {
		t.Errorf("log: %q", log.String())
	}
	for _, want := range []string{
		"<!-- perfdoc:begin sim -->\n_No results yet: `docs/perf/sim.jsonl`",
		"<!-- perfdoc:begin streams -->\n_No results yet in `docs/perf/streambench/`",
	} {
		if !strings.Contains(string(outs[0].data), want) {
			t.Errorf("a block does not say it has no results: no %q in\n%s", want, outs[0].data)
		}
	}
}

func TestBuildFailures(t *testing.T) {
	t.Parallel()
	t.Run("a block's markers missing", func(t *testing.T) {
		t.Parallel()
		dir, doc := testTree(t, false)
		if err := os.WriteFile(doc, []byte(strings.Replace(testDoc, "<!-- perfdoc:end fanout-runs -->\n", "", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := build(dir, doc, io.Discard); err == nil || !strings.Contains(err.Error(), "fanout-runs") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("no loadgen results", func(t *testing.T) {
		t.Parallel()
		dir, doc := testTree(t, false)
		if err := os.RemoveAll(filepath.Join(dir, "loadgen")); err != nil {
			t.Fatal(err)
		}
		if _, err := build(dir, doc, io.Discard); err == nil || !strings.Contains(err.Error(), "no loadgen fanout results") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("a broken streambench file", func(t *testing.T) {
		t.Parallel()
		dir, doc := testTree(t, false)
		if err := os.MkdirAll(filepath.Join(dir, "streambench"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "streambench", "idle-h1-10-1.json"), []byte(`{"n":10}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := build(dir, doc, io.Discard); err == nil || !strings.Contains(err.Error(), "want a proto") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("a broken simulation file", func(t *testing.T) {
		t.Parallel()
		dir, doc := testTree(t, false)
		if err := os.WriteFile(filepath.Join(dir, "sim.jsonl"), []byte("{\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := build(dir, doc, io.Discard); err == nil || !strings.Contains(err.Error(), "sim.jsonl: line 1") {
			t.Errorf("got %v", err)
		}
	})
}

// TestCommitted checks that docs/performance.md and docs/perf/*.svg are
// what the committed JSON gives, as perfdoc -check does.
func TestCommitted(t *testing.T) {
	t.Parallel()
	outs, err := build("../../../docs/perf", "../../../docs/performance.md", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := compare(outs)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range stale {
		t.Errorf("%s is stale: run go run ./internal/cmd/perfdoc", name)
	}
}

// The streams table names what was measured and how many streams shared
// a connection, the standalone first and net/http alone last.
func TestStreamsTableLabels(t *testing.T) {
	t.Parallel()
	runs := []streamRun{
		{Label: "floor", Proto: "h2", Share: 100, N: 2000, RSSPerStreamB: 16500},
		{Proto: "h2", Share: 100, N: 2000, RSSPerStreamB: 23800},
		{Label: "standalone", Proto: "h2", Share: 100, N: 2000, RSSPerStreamB: 27500},
		{Label: "standalone", Proto: "h2", N: 2000, RSSPerStreamB: 66500},
	}
	got := streamsTable(runs)
	var names []string
	for line := range strings.SplitSeq(got, "\n") {
		if cells := strings.Split(line, " | "); len(cells) > 1 && !strings.HasPrefix(line, "| ---") && !strings.HasPrefix(line, "| streams") {
			names = append(names, strings.TrimPrefix(cells[0], "| "))
		}
	}
	want := []string{
		"standalone: HTTP/2 over TLS",
		"standalone: HTTP/2 over TLS, 100 per connection",
		"HTTP/2 over TLS, 100 per connection",
		"**net/http alone**: HTTP/2 over TLS, 100 per connection",
	}
	if !slices.Equal(names, want) {
		t.Errorf("rows %q, want %q\n%s", names, want, got)
	}
}

// A simulation row with every figure shows the probe, the idle CPU and
// the shutdown, which say whether a walk under a lock came back.
func TestSimTableProbe(t *testing.T) {
	t.Parallel()
	got := simTable([]simRow{{Scenario: "exact", Subs: 1000000, HeapPerSubB: 902, Goroutines: 2, SubscribeUsPerSub: 6.56,
		SubscribeCPUUs: 11.9, CPUPerDeliveryUs: 9.31, CPUPerUpdateUs: 9.31, Deliveries: 20000, WallS: 0.1,
		ProbeMaxUs: 73800, ProbeP99Us: 100, IdleCPUMsPerS: 59.2, ShutdownS: 2.18}})
	want := "| exact | 1 000 000 | 902 B | 0 B | 2 | 6.56 / 11.9 µs | 9.31 µs | 9.31 µs | 20 000 | 0.10 s | 73.8 / 0.10 ms | 59.2 ms/s | 2.18 s |\n"
	if !strings.Contains(got, want) {
		t.Errorf("got\n%s\nwant the row\n%s", got, want)
	}
}
