package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// hubNames are the legends and column titles of the hubs run.sh measures.
var hubNames = map[string]string{
	"default":     "mercure (default engine)",
	"goroutine":   "mercure (goroutine engine)",
	"broadcaster": "broadcaster",
}

// hubName returns the display name of a hub label.
func hubName(label string) string {
	if n, ok := hubNames[label]; ok {
		return n
	}
	return label
}

// named returns ss with display names.
func named(ss []series) []series {
	out := slices.Clone(ss)
	for i := range out {
		out[i].Name = hubName(out[i].Name)
	}
	return out
}

// groupDigits writes v rounded to an integer, its digits in groups of
// three: 19 000.
func groupDigits(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// figure writes a measured value with three significant digits or so.
func figure(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return groupDigits(v)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// cell writes a summary: the median and, over several differing runs,
// the smallest and largest in brackets.
func cell(s summary, unit string) string {
	if s.N == 0 {
		return "—"
	}
	out := figure(s.Median) + unit
	if s.N > 1 && s.Max > s.Min {
		out += " (" + figure(s.Min) + "–" + figure(s.Max) + ")"
	}
	return out
}

// table writes a markdown table.
func table(head []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(head, " | ") + " |\n")
	b.WriteString(strings.Repeat("| --- ", len(head)) + "|\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// compareTable has a row per S and a column per series, then the ratio of
// each other series to the broadcaster, then the load averages around
// the runs at that S.
func compareTable(ss []series, unit string, load map[int]summary) string {
	head := []string{"S"}
	for _, s := range ss {
		head = append(head, hubName(s.Name))
	}
	base := slices.IndexFunc(ss, func(s series) bool { return s.Name == "broadcaster" })
	if base >= 0 {
		for _, s := range ss {
			if s.Name != "broadcaster" {
				head = append(head, s.Name+" / broadcaster")
			}
		}
	}
	head = append(head, "load average")
	var rows [][]string
	for _, x := range xs(ss) {
		row := []string{groupDigits(x)}
		for _, s := range ss {
			p, _ := s.at(x)
			row = append(row, cell(p.Y, unit))
		}
		if base >= 0 {
			b, okb := ss[base].at(x)
			for _, s := range ss {
				if s.Name == "broadcaster" {
					continue
				}
				p, ok := s.at(x)
				if !ok || !okb || b.Y.Median == 0 {
					row = append(row, "—")
					continue
				}
				row = append(row, strconv.FormatFloat(p.Y.Median/b.Y.Median, 'f', 2, 64))
			}
		}
		row = append(row, loadCell(load[int(x)]))
		rows = append(rows, row)
	}
	return table(head, rows)
}

// loadCell writes a range of load averages.
func loadCell(s summary) string {
	switch {
	case s.N == 0:
		return "—"
	case s.Min == s.Max:
		return strconv.FormatFloat(s.Min, 'f', 1, 64)
	}
	return strconv.FormatFloat(s.Min, 'f', 1, 64) + "–" + strconv.FormatFloat(s.Max, 'f', 1, 64)
}

// loadBySubs returns the range of the 1-minute load averages recorded
// around the runs at each S.
func loadBySubs(runs []run) map[int]summary {
	vs := map[int][]float64{}
	for _, r := range runs {
		vs[r.Subs] = append(vs[r.Subs], r.Load...)
	}
	out := map[int]summary{}
	for s, v := range vs {
		if len(v) > 0 {
			out[s] = summarize(v)
		}
	}
	return out
}

// runsTable lists every run with its figures and conditions.
func runsTable(runs []run) string {
	head := []string{"hub", "S", "run", "hub CPU per delivery", "RSS per subscriber", "deliveries/s", "lost", "load average (before, after)", "commit", "date"}
	var rows [][]string
	for _, r := range runs {
		load := make([]string, len(r.Load))
		for i, l := range r.Load {
			load[i] = strconv.FormatFloat(l, 'f', 2, 64)
		}
		rows = append(rows, []string{
			hubName(r.Hub), groupDigits(float64(r.Subs)), r.ID,
			figure(r.CPUPerDeliveryUs) + " µs", groupDigits(r.BytesPerSub) + " B",
			groupDigits(r.DeliveriesPerS), strconv.FormatInt(r.Lost, 10),
			orDash(strings.Join(load, ", ")), orDash(r.Commit), orDash(r.Date),
		})
	}
	return table(head, rows)
}

// orDash returns s, or a dash for nothing.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// simTable lists the simulation's rows, by scenario and S.
func simTable(rows []simRow) string {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b simRow) int {
		if c := hubOrder(a.Scenario, b.Scenario); c != 0 {
			return c
		}
		return a.Subs - b.Subs
	})
	head := []string{"scenario", "S", "heap per subscriber", "stacks per subscriber", "goroutines", "subscribe, per subscriber (wall / CPU)",
		"CPU per delivery", "CPU per update", "deliveries", "wall time", "one more subscribe while idle (max / p99)", "idle CPU", "shutdown"}
	var out [][]string
	for _, r := range rows {
		out = append(out, []string{
			r.Scenario, groupDigits(float64(r.Subs)),
			groupDigits(r.HeapPerSubB) + " B", groupDigits(r.StackPerSubB) + " B",
			groupDigits(float64(r.Goroutines)), figure(r.SubscribeUsPerSub) + " / " + orDash(optFigure(r.SubscribeCPUUs)) + " µs",
			figure(r.CPUPerDeliveryUs) + " µs", figure(r.CPUPerUpdateUs) + " µs",
			groupDigits(float64(r.Deliveries)), figure(r.WallS) + " s",
			orDash(optFigure(r.ProbeMaxUs/1000)) + " / " + orDash(optFigure(r.ProbeP99Us/1000)) + " ms",
			orDash(optFigure(r.IdleCPUMsPerS)) + " ms/s", orDash(optFigure(r.ShutdownS)) + " s",
		})
	}
	return table(head, out)
}

// simConditions says where the simulation ran: the distinct Go versions,
// GOMAXPROCS values and dates of its rows.
func simConditions(rows []simRow) string {
	var gov, procs, dates []string
	for _, r := range rows {
		gov = append(gov, r.GoVersion)
		procs = append(procs, strconv.Itoa(r.GOMAXPROCS))
		dates = append(dates, r.Date)
	}
	list := func(s []string) string {
		slices.Sort(s)
		return orDash(strings.Join(slices.Compact(s), ", "))
	}
	slices.Sort(dates)
	when := orDash(dates[0])
	if last := dates[len(dates)-1]; last != dates[0] {
		when += " to " + last
	}
	return fmt.Sprintf("%s, GOMAXPROCS %s, %s", list(gov), list(procs), when)
}

// optFigure is figure for a value the row may lack (zero): empty then.
func optFigure(v float64) string {
	if v == 0 {
		return ""
	}
	return figure(v)
}

// protoNames are the row titles of streambench's protocols.
var protoNames = map[string]string{
	"h1":     "HTTP/1.1, plain",
	"h1-tls": "HTTP/1.1 over TLS",
	"h2":     "HTTP/2 over TLS",
}

// labelNames names what streambench measured, by its -label.
var labelNames = map[string]string{
	"standalone": "standalone",
	"floor":      "**net/http alone**",
}

// streamsTable has a row per protocol, stream count and subscription
// kind: the medians of the runs, their spread in brackets.
func streamsTable(runs []streamRun) string {
	type key struct {
		label, proto string
		share, n     int
		pattern      bool
	}
	byKey := map[key][]streamRun{}
	var keys []key
	for _, r := range runs {
		k := key{r.Label, r.Proto, max(r.Share, 1), r.N, r.Pattern}
		if _, seen := byKey[k]; !seen {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	protos := []string{"h1", "h1-tls", "h2"}
	labels := []string{"standalone", "", "floor"}
	// rank orders by place in order, then by name for what it lacks.
	rank := func(order []string, a, b string) int {
		return cmp.Or(cmp.Compare(slices.Index(order, a), slices.Index(order, b)), strings.Compare(a, b))
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(rank(protos, a.proto, b.proto), cmp.Compare(a.share, b.share), rank(labels, a.label, b.label),
			cmp.Compare(a.n, b.n), strings.Compare(fmt.Sprint(a.pattern), fmt.Sprint(b.pattern)))
	})
	head := []string{"streams", "n", "RSS per stream", "live heap per stream", "goroutine stacks per stream", "goroutines", "hub CPU per delivery", "runs", "load average"}
	var rows [][]string
	for _, k := range keys {
		rs := byKey[k]
		col := func(f func(streamRun) float64) summary {
			var vs []float64
			for _, r := range rs {
				if v := f(r); v > 0 {
					vs = append(vs, v)
				}
			}
			return summarize(vs)
		}
		var load []float64
		for _, r := range rs {
			load = append(load, r.Load...)
		}
		name := protoNames[k.proto]
		if name == "" {
			name = k.proto
		}
		if k.share > 1 {
			name += fmt.Sprintf(", %d per connection", k.share)
		}
		if k.pattern {
			name += ", own URL pattern"
		}
		if l := labelNames[k.label]; l != "" {
			name = l + ": " + name
		} else if k.label != "" {
			name = k.label + ": " + name
		}
		gor := col(func(r streamRun) float64 { return r.Goroutines })
		rows = append(rows, []string{
			name, groupDigits(float64(k.n)),
			byteCell(col(func(r streamRun) float64 { return r.RSSPerStreamB })),
			byteCell(col(func(r streamRun) float64 { return r.HeapPerStreamB })),
			byteCell(col(func(r streamRun) float64 { return r.StackPerStreamB })),
			orDash(cellInt(gor)),
			cell(col(func(r streamRun) float64 { return r.CPUPerDeliveryUs }), " µs"),
			strconv.Itoa(len(rs)), loadCell(summarize(load)),
		})
	}
	return table(head, rows)
}

// byteCell writes a summary of byte counts, in whole bytes.
func byteCell(s summary) string {
	if s.N == 0 {
		return "—"
	}
	out := groupDigits(s.Median) + " B"
	if s.N > 1 && math.Round(s.Max) > math.Round(s.Min) {
		out += " (" + groupDigits(s.Min) + "–" + groupDigits(s.Max) + ")"
	}
	return out
}

// cellInt writes a summary of counts.
func cellInt(s summary) string {
	if s.N == 0 {
		return ""
	}
	out := groupDigits(s.Median)
	if s.N > 1 && s.Max > s.Min {
		out += " (" + groupDigits(s.Min) + "–" + groupDigits(s.Max) + ")"
	}
	return out
}
