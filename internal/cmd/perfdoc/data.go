package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// loadgenFile is what loadgen writes with -json-out: its configuration
// and one result per (scenario, S) run.
type loadgenFile struct {
	Loadgen struct {
		Hub string `json:"hub"`
	} `json:"loadgen"`
	Results []loadgenResult `json:"results"`
}

// loadgenResult holds the fields of a loadgen result that perfdoc reads.
type loadgenResult struct {
	Scenario       string  `json:"scenario"`
	Subs           int     `json:"subs"`
	Pubs           int     `json:"pubs"`
	Delivered      int64   `json:"delivered"`
	Lost           int64   `json:"lost"`
	Disconnected   int     `json:"disconnected"`
	DeliveriesPerS float64 `json:"deliveries_per_s"`
	BytesPerSub    float64 `json:"bytes_per_sub"`
	HubCPUPct      float64 `json:"hub_cpu_pct"`
	WindowS        float64 `json:"window_s"`
	HubDied        bool    `json:"hub_died"`
	Note           string  `json:"note"`
}

// run is one loadgen result, labelled with the hub it measured.
type run struct {
	Hub      string // from the file name: default, goroutine, broadcaster…
	ID       string // the run's label, last field of the file name
	File     string // base name of the JSON file
	Scenario string
	Subs     int

	CPUPerDeliveryUs float64 // hub CPU time over the publish+drain window / deliveries
	BytesPerSub      float64 // (RSS with S subscribers − RSS idle) / S
	DeliveriesPerS   float64
	Lost             int64

	Commit string    // from the sidecar, if any
	Date   string    // from the sidecar, if any
	Load   []float64 // 1-minute load averages around the run, from the sidecar
}

// readLoadgenDir reads every loadgen JSON file of dir, named
// <hub>-<scenario>-<S>-<run>.json, with its optional sidecar
// <same>.uptime. Runs come sorted by hub, scenario, S and file name.
func readLoadgenDir(dir string) ([]run, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var runs []run
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		rs, err := parseLoadgen(filepath.Base(name), b)
		if err != nil {
			return nil, err
		}
		side, err := os.ReadFile(strings.TrimSuffix(name, ".json") + ".uptime")
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		for i := range rs {
			rs[i].Commit, rs[i].Date, rs[i].Load = parseSidecar(side)
		}
		runs = append(runs, rs...)
	}
	slices.SortStableFunc(runs, func(a, b run) int {
		if c := hubOrder(a.Hub, b.Hub); c != 0 {
			return c
		}
		if c := strings.Compare(a.Scenario, b.Scenario); c != 0 {
			return c
		}
		if a.Subs != b.Subs {
			return a.Subs - b.Subs
		}
		return strings.Compare(a.File, b.File)
	})
	return runs, nil
}

// parseLoadgen reads one loadgen JSON file called name.
func parseLoadgen(name string, b []byte) ([]run, error) {
	hub, id, err := parseRunName(name)
	if err != nil {
		return nil, err
	}
	var f loadgenFile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(f.Results) == 0 {
		return nil, fmt.Errorf("%s: no results", name)
	}
	runs := make([]run, 0, len(f.Results))
	for _, r := range f.Results {
		if r.HubDied || r.Note != "" || r.Delivered == 0 || r.WindowS <= 0 {
			return nil, fmt.Errorf("%s: %s S=%d did not complete (hub died: %v, delivered %d, note %q): measure it again or remove it",
				name, r.Scenario, r.Subs, r.HubDied, r.Delivered, r.Note)
		}
		runs = append(runs, run{
			Hub: hub, ID: id, File: name, Scenario: r.Scenario, Subs: r.Subs,
			CPUPerDeliveryUs: r.HubCPUPct / 100 * r.WindowS / float64(r.Delivered) * 1e6,
			BytesPerSub:      r.BytesPerSub,
			DeliveriesPerS:   r.DeliveriesPerS,
			Lost:             r.Lost,
		})
	}
	return runs, nil
}

// parseRunName splits <hub>-<scenario>-<S>-<run>.json into the hub's
// label and the run's. The scenario and S are read from the file itself.
func parseRunName(name string) (hub, id string, err error) {
	base, ok := strings.CutSuffix(name, ".json")
	fields := strings.Split(base, "-")
	if !ok || len(fields) < 4 || fields[0] == "" || fields[len(fields)-1] == "" {
		return "", "", fmt.Errorf("%s: want a name <hub>-<scenario>-<S>-<run>.json", name)
	}
	if _, err := strconv.Atoi(fields[len(fields)-2]); err != nil {
		return "", "", fmt.Errorf("%s: want a name <hub>-<scenario>-<S>-<run>.json (S is not a number)", name)
	}
	return fields[0], fields[len(fields)-1], nil
}

// parseSidecar reads a run's .uptime file: a "commit HASH" line, a
// "date DATE" line and lines with `uptime`'s output, of which it keeps
// each 1-minute load average.
func parseSidecar(b []byte) (commit, date string, load []float64) {
	for line := range strings.Lines(string(b)) {
		if c, ok := strings.CutPrefix(line, "commit "); ok {
			commit = strings.TrimSpace(c)
			continue
		}
		if d, ok := strings.CutPrefix(line, "date "); ok {
			date = strings.TrimSpace(d)
			continue
		}
		_, after, ok := strings.Cut(line, "load average:")
		if !ok {
			continue
		}
		first, _, _ := strings.Cut(after, ",")
		if v, err := strconv.ParseFloat(strings.TrimSpace(first), 64); err == nil {
			load = append(load, v)
		}
	}
	return commit, date, load
}

// simRow is one line of docs/perf/sim.jsonl, written by
// internal/cmd/simscale: the hub simulated in process at S subscribers.
type simRow struct {
	Scenario          string  `json:"scenario"`
	Subs              int     `json:"subs"`
	HeapPerSubB       float64 `json:"heap_per_sub_b"`
	StackPerSubB      float64 `json:"stack_per_sub_b"`
	Goroutines        int64   `json:"goroutines"`
	SubscribeUsPerSub float64 `json:"subscribe_us_per_sub"`
	SubscribeCPUUs    float64 `json:"subscribe_cpu_us_per_sub"`
	CPUPerDeliveryUs  float64 `json:"cpu_per_delivery_us"`
	CPUPerUpdateUs    float64 `json:"cpu_per_update_us"`
	Deliveries        int64   `json:"deliveries"`
	WallS             float64 `json:"wall_s"`
	// ProbeMaxUs and ProbeP99Us are how long opening and ending one more
	// subscriber took while the others idled: what a walk under an
	// engine-wide lock stalls. IdleCPUMsPerS is the CPU an idle second
	// costs (the keep-alive sweep); ShutdownS how long Hub.Shutdown took.
	ProbeMaxUs    float64 `json:"probe_max_us"`
	ProbeP99Us    float64 `json:"probe_p99_us"`
	IdleCPUMsPerS float64 `json:"idle_cpu_ms_per_s"`
	ShutdownS     float64 `json:"shutdown_s"`
	GoVersion     string  `json:"go_version"`
	GOMAXPROCS    int     `json:"gomaxprocs"`
	Date          string  `json:"date"`
}

// readSim reads JSON Lines of simRow; blank lines are skipped.
func readSim(r io.Reader) ([]simRow, error) {
	var rows []simRow
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var row simRow
		if err := json.Unmarshal(line, &row); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if row.Scenario == "" || row.Subs <= 0 {
			return nil, fmt.Errorf("line %d: want a scenario and subs > 0", n)
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// knownOrder lists hubs and scenarios in the order tables and legends
// show them; others follow, sorted by name.
var knownOrder = []string{"default", "goroutine", "broadcaster", "fanout", "exact", "urlpattern"}

// hubOrder compares two hub (or scenario) labels in display order.
func hubOrder(a, b string) int {
	ia, ib := slices.Index(knownOrder, a), slices.Index(knownOrder, b)
	switch {
	case ia >= 0 && ib >= 0:
		return ia - ib
	case ia >= 0:
		return -1
	case ib >= 0:
		return 1
	}
	return strings.Compare(a, b)
}

// streamRun is one `streambench idle -json` result: idle streams of one
// protocol, their memory and the hub's CPU time per delivery.
type streamRun struct {
	// Label is what was measured (streambench -label): the hub served
	// by streambench when empty, "standalone", or "floor" (net/http
	// alone, streambench serve -handler floor).
	Label string `json:"label"`
	Proto string `json:"proto"`
	// Share is how many streams shared each client (HTTP/2: one
	// connection); 0 or 1 for a connection each.
	Share            int     `json:"share"`
	N                int     `json:"n"`
	Pattern          bool    `json:"pattern"`
	RSSPerStreamB    float64 `json:"rss_per_stream_b"`
	HeapPerStreamB   float64 `json:"heap_per_stream_b"`
	StackPerStreamB  float64 `json:"stack_per_stream_b"`
	Goroutines       float64 `json:"goroutines"`
	CPUPerDeliveryUs float64 `json:"cpu_per_delivery_us"`

	File string    `json:"-"`
	Load []float64 `json:"-"` // from the sidecar, as for loadgen's runs
}

// readStreamDir reads every streambench JSON file of dir (any name ending
// in .json) with its optional .uptime sidecar, sorted by file name. A
// missing dir gives no runs.
func readStreamDir(dir string) ([]streamRun, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var runs []streamRun
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var r streamRun
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if r.Proto == "" || r.N <= 0 {
			return nil, fmt.Errorf("%s: want a proto and n > 0", name)
		}
		side, err := os.ReadFile(strings.TrimSuffix(name, ".json") + ".uptime")
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		_, _, r.Load = parseSidecar(side)
		r.File = filepath.Base(name)
		runs = append(runs, r)
	}
	return runs, nil
}
