// Command perfdoc regenerates the measured curves of docs/performance.md:
// its generated tables, between marker comments, and the SVG plots of
// docs/perf/, from the JSON files the measuring tools wrote there.
//
//	go run ./internal/cmd/perfdoc          # rewrite the tables and plots
//	go run ./internal/cmd/perfdoc -check   # exit 1 if they differ from the JSON
//
// It reads:
//
//   - docs/perf/loadgen/<hub>-<scenario>-<S>-<run>.json: loadgen's output
//     (-json-out), one file per run, the hub's label in the name; and the
//     optional sidecar <same>.uptime that docs/perf/run.sh writes (the
//     commit measured and the load averages around the run);
//   - docs/perf/streambench/*.json: `streambench idle -json` results, one
//     file per run, with the same optional sidecar; while there are none,
//     the streams block says so;
//   - docs/perf/sim.jsonl: internal/cmd/simscale's results, one JSON object
//     a line. While it is absent, the simulation's block says so and its
//     plots are not drawn.
//
// A generated block of the markdown file lies between
// "<!-- perfdoc:begin NAME -->" and "<!-- perfdoc:end NAME -->"; nothing
// outside the blocks is changed. The same input gives the same bytes, so
// that -check can compare them.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	dir := flag.String("dir", "docs/perf", "the directory of the JSON results, where the plots are written")
	doc := flag.String("doc", "docs/performance.md", "the markdown file whose generated blocks are rewritten")
	check := flag.Bool("check", false, "write nothing; exit 1 if the tables or plots differ from what the JSON gives")
	flag.Parse()

	outs, err := build(*dir, *doc, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfdoc:", err)
		os.Exit(2)
	}
	if *check {
		stale, err := compare(outs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perfdoc:", err)
			os.Exit(2)
		}
		for _, name := range stale {
			fmt.Fprintf(os.Stderr, "perfdoc: %s is not what the JSON gives: run go run ./internal/cmd/perfdoc\n", name)
		}
		if len(stale) > 0 {
			os.Exit(1)
		}
		return
	}
	for _, o := range outs {
		if err := os.WriteFile(o.path, o.data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "perfdoc:", err)
			os.Exit(2)
		}
	}
}

// output is a file perfdoc generates.
type output struct {
	path string
	data []byte
}

// compare returns the outputs whose file differs (or is missing).
func compare(outs []output) ([]string, error) {
	var stale []string
	for _, o := range outs {
		b, err := os.ReadFile(o.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if !bytes.Equal(b, o.data) {
			stale = append(stale, o.path)
		}
	}
	return stale, nil
}

// build reads the results of dir and returns the rewritten doc and the
// plots; log receives what was skipped and why.
func build(dir, doc string, log io.Writer) ([]output, error) {
	md, err := os.ReadFile(doc)
	if err != nil {
		return nil, err
	}
	// The plots' address as the markdown file links them.
	rel, err := filepath.Rel(filepath.Dir(doc), dir)
	if err != nil {
		return nil, err
	}
	link := func(name string) string { return path.Join(filepath.ToSlash(rel), name) }

	blocks := map[string]string{}
	var outs []output
	add := func(name string, svg []byte) { outs = append(outs, output{filepath.Join(dir, name), svg}) }

	runs, err := readLoadgenDir(filepath.Join(dir, "loadgen"))
	if err != nil {
		return nil, err
	}
	if err := loadgenBlocks(runs, blocks, add, link); err != nil {
		return nil, err
	}
	streams, err := readStreamDir(filepath.Join(dir, "streambench"))
	if err != nil {
		return nil, err
	}
	if len(streams) == 0 {
		fmt.Fprintf(log, "perfdoc: no results in %s: the streams block says so\n", filepath.Join(dir, "streambench"))
		blocks["streams"] = "_No results yet in `docs/perf/streambench/` (`streambench idle -json`)._\n"
	} else {
		blocks["streams"] = streamsTable(streams)
	}
	sim, err := readSimFile(filepath.Join(dir, "sim.jsonl"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(log, "perfdoc: %s is absent: the simulation's block says so and its plots are not drawn\n", filepath.Join(dir, "sim.jsonl"))
		blocks["sim"] = "_No results yet: `docs/perf/sim.jsonl` (written by `internal/cmd/simscale`) is absent._\n"
	case err != nil:
		return nil, err
	default:
		if err := simBlocks(sim, blocks, add, link); err != nil {
			return nil, err
		}
	}
	md, err = rewrite(md, blocks)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doc, err)
	}
	return append([]output{{doc, md}}, outs...), nil
}

// readSimFile reads the simulation's JSON Lines file.
func readSimFile(name string) ([]simRow, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := readSim(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no results", name)
	}
	return rows, nil
}

// Plot file names.
const (
	cpuSVG        = "cpu-per-delivery.svg"
	rssSVG        = "rss-per-sub.svg"
	simHeapSVG    = "sim-heap-per-sub.svg"
	simCPUSVG     = "sim-cpu-per-delivery.svg"
	loadgenSource = "loadgen fanout, hub on one core, loopback"
)

// loadgenBlocks makes the blocks and plots of loadgen's fanout runs:
// "fanout" (plots and the tables per S) and "fanout-runs" (every run).
func loadgenBlocks(all []run, blocks map[string]string, add func(string, []byte), link func(string) string) error {
	runs := slices.DeleteFunc(slices.Clone(all), func(r run) bool { return r.Scenario != "fanout" })
	if len(runs) == 0 {
		return errors.New("no loadgen fanout results in docs/perf/loadgen: run docs/perf/run.sh")
	}
	label := func(r run) string { return r.Hub }
	subs := func(r run) int { return r.Subs }
	cpu := group(runs, label, subs, func(r run) (float64, bool) { return r.CPUPerDeliveryUs, true })
	rss := group(runs, label, subs, func(r run) (float64, bool) { return r.BytesPerSub, r.BytesPerSub > 0 })

	cpuPlot := plot{
		Title: "Hub CPU per delivery, saturated", Subtitle: loadgenSource,
		XLabel: "subscribers (S)", YLabel: "hub CPU time per delivery (µs)", YUnit: "µs", Series: named(cpu),
	}
	rssPlot := plot{
		Title: "RSS per idle subscriber", Subtitle: loadgenSource + ", before publishing",
		XLabel: "subscribers (S)", YLabel: "hub RSS per subscriber (bytes)", YUnit: "B", Series: named(rss),
	}
	if err := draw(add, cpuSVG, cpuPlot, rssSVG, rssPlot); err != nil {
		return err
	}
	load := loadBySubs(runs)
	blocks["fanout"] = fmt.Sprintf("![Hub CPU per delivery against S, per hub](%s)\n![RSS per idle subscriber against S, per hub](%s)\n\n"+
		"Hub CPU time per delivery, saturated (loadgen's `hub_cpu_pct` × `window_s` / `delivered`):\n\n%s\n"+
		"RSS per idle subscriber (loadgen's `bytes_per_sub`: the hub's RSS with S subscribers connected, less its RSS before, over S):\n\n%s",
		link(cpuSVG), link(rssSVG),
		compareTable(cpu, " µs", load), compareTable(rss, " B", load))
	blocks["fanout-runs"] = runsTable(runs)
	return nil
}

// simBlocks makes the block "sim" and its plots.
func simBlocks(rows []simRow, blocks map[string]string, add func(string, []byte), link func(string) string) error {
	label := func(r simRow) string { return r.Scenario }
	subs := func(r simRow) int { return r.Subs }
	heap := group(rows, label, subs, func(r simRow) (float64, bool) { return r.HeapPerSubB, r.HeapPerSubB > 0 })
	cpu := group(rows, label, subs, func(r simRow) (float64, bool) { return r.CPUPerDeliveryUs, r.CPUPerDeliveryUs > 0 })
	conditions := "simscale, " + simConditions(rows)
	heapPlot := plot{
		Title: "Heap per subscriber, simulated", Subtitle: conditions,
		XLabel: "subscribers (S)", YLabel: "live heap per subscriber (bytes)", YUnit: "B", Series: heap,
	}
	cpuPlot := plot{
		Title: "CPU per delivery, simulated", Subtitle: conditions,
		XLabel: "subscribers (S)", YLabel: "CPU time per delivery (µs)", YUnit: "µs", Series: cpu,
	}
	if err := draw(add, simHeapSVG, heapPlot, simCPUSVG, cpuPlot); err != nil {
		return err
	}
	blocks["sim"] = fmt.Sprintf("![Heap per subscriber against S, simulated](%s)\n![CPU per delivery against S, simulated](%s)\n\n%s\n%s.\n",
		link(simHeapSVG), link(simCPUSVG), simTable(rows), strings.TrimPrefix(conditions, "simscale, "))
	return nil
}

// draw renders two plots and adds them as files name1 and name2.
func draw(add func(string, []byte), name1 string, p1 plot, name2 string, p2 plot) error {
	for _, f := range []struct {
		name string
		p    plot
	}{{name1, p1}, {name2, p2}} {
		svg, err := f.p.SVG()
		if err != nil {
			return err
		}
		add(f.name, svg)
	}
	return nil
}

// markerRE finds a block's begin or end marker.
var markerRE = regexp.MustCompile(`<!-- perfdoc:(begin|end) ([^ ]*) -->`)

// rewrite replaces the content of each block of md with blocks[name]. It
// fails if a block has no markers, or markers appear for a block it does
// not make, or markers are out of order.
func rewrite(md []byte, blocks map[string]string) ([]byte, error) {
	for _, m := range markerRE.FindAllSubmatch(md, -1) {
		if _, ok := blocks[string(m[2])]; !ok {
			return nil, fmt.Errorf("marker %q: perfdoc makes no block %q", m[0], m[2])
		}
	}
	names := make([]string, 0, len(blocks))
	for name := range blocks {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var err error
		if md, err = replaceBlock(md, name, blocks[name]); err != nil {
			return nil, err
		}
	}
	return md, nil
}

// replaceBlock replaces what lies between the markers of block name with
// body, which it ends with a newline if it does not.
func replaceBlock(md []byte, name, body string) ([]byte, error) {
	begin := []byte("<!-- perfdoc:begin " + name + " -->")
	end := []byte("<!-- perfdoc:end " + name + " -->")
	nb, ne := bytes.Count(md, begin), bytes.Count(md, end)
	if nb != 1 || ne != 1 {
		return nil, fmt.Errorf("block %q: want one %s and one %s, found %d and %d", name, begin, end, nb, ne)
	}
	i := bytes.Index(md, begin) + len(begin)
	j := bytes.Index(md, end)
	if j < i {
		return nil, fmt.Errorf("block %q: its end marker comes before its begin marker", name)
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	out := make([]byte, 0, len(md)+len(body))
	out = append(out, md[:i]...)
	out = append(out, '\n')
	out = append(out, body...)
	return append(out, md[j:]...), nil
}
