package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
)

// plot is a chart of series against S, both axes logarithmic: the costs
// compared span a factor of ten between hubs, and S several decades.
type plot struct {
	Title    string
	Subtitle string // the conditions, in smaller type under the title
	XLabel   string
	YLabel   string // with its unit
	YUnit    string // appended to values in the points' tooltips
	Series   []series
}

// The chart's geometry, in SVG user units: the plot area, with the axes'
// labels left of and below it and the legend right of it.
const (
	svgWidth   = 800
	svgHeight  = 440
	areaLeft   = 80
	areaRight  = 580
	areaTop    = 70
	areaBottom = 380
	legendX    = 600
)

// palette gives each series a color and a marker, in order, so that the
// curves stay apart in print and for readers who do not tell colors apart.
var palette = []struct{ color, marker string }{
	{"#1f5fa8", "circle"},
	{"#c0392b", "square"},
	{"#2e8b57", "diamond"},
	{"#8e44ad", "triangle"},
	{"#d68910", "circle"},
	{"#555555", "square"},
}

// hubStyles fixes the palette entry of the hubs, so that a hub keeps its
// color and marker from plot to plot, whichever hubs were measured.
var hubStyles = map[string]int{
	hubNames["default"]:     0,
	hubNames["broadcaster"]: 1,
	hubNames["goroutine"]:   2,
}

// styleOf returns the palette entry of the i-th series, called name.
func styleOf(name string, i int) int {
	if k, ok := hubStyles[name]; ok {
		return k
	}
	return i % len(palette)
}

// logAxis maps values of [lo, hi] (lo > 0) to positions, logarithmically.
type logAxis struct{ lo, hi float64 }

// newLogAxis returns an axis covering [min, max] with a margin on each
// side, so that no point sits on the frame.
func newLogAxis(min, max float64) logAxis {
	if min <= 0 || max <= 0 || math.IsInf(max, 0) || math.IsNaN(min) || math.IsNaN(max) {
		panic(fmt.Sprintf("perfdoc: log axis over [%v, %v]", min, max))
	}
	span := math.Log10(max / min)
	pad := math.Max(span*0.08, 0.1)
	return logAxis{lo: min / math.Pow(10, pad), hi: max * math.Pow(10, pad)}
}

// pos returns v's position between p0 (at lo) and p1 (at hi).
func (a logAxis) pos(v, p0, p1 float64) float64 {
	f := math.Log10(v/a.lo) / math.Log10(a.hi/a.lo)
	// The conversion keeps the compiler from fusing the multiply and add
	// (as it may on arm64): every platform writes the same coordinates.
	return p0 + float64(f*(p1-p0))
}

// ticks returns the round values within the axis: 1, 2 and 5 times the
// powers of ten over up to a few decades, powers of ten beyond, more
// values when the axis spans little more than a decade or less.
func (a logAxis) ticks() []float64 {
	span := math.Log10(a.hi / a.lo)
	mantissas := []int{1, 2, 5}
	switch {
	case span > 4:
		mantissas = []int{1}
	case span < 0.8:
		mantissas = []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	case span < 2:
		mantissas = []int{1, 2, 3, 5}
	}
	var out []float64
	for k := int(math.Floor(math.Log10(a.lo))); k <= int(math.Ceil(math.Log10(a.hi))); k++ {
		for _, m := range mantissas {
			v := decimal(m, k)
			if v >= a.lo && v <= a.hi {
				out = append(out, v)
			}
		}
	}
	return out
}

// decimal returns m × 10^k, rounded as the decimal it is (3 × 10⁻¹ is 0.3,
// not 0.30000000000000004).
func decimal(m, k int) float64 {
	v, _ := strconv.ParseFloat(strconv.Itoa(m)+"e"+strconv.Itoa(k), 64)
	return v
}

// tickLabel writes a tick's value short: 500, 2k, 1M, 0.2.
func tickLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// bounds returns the range of the X values and of the Y spreads of ss,
// over positive values only (a log axis cannot show the others).
func bounds(ss []series) (xmin, xmax, ymin, ymax float64, ok bool) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.Points {
			if p.X <= 0 || p.Y.Min <= 0 {
				continue
			}
			xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
			ymin, ymax = math.Min(ymin, p.Y.Min), math.Max(ymax, p.Y.Max)
			ok = true
		}
	}
	return xmin, xmax, ymin, ymax, ok
}

// svgWriter accumulates an SVG document; numbers are written with one
// decimal, so that the same plot always gives the same bytes.
type svgWriter struct{ bytes.Buffer }

func (w *svgWriter) printf(format string, args ...any) { fmt.Fprintf(w, format, args...) }

// text writes s at (x, y), escaped; attrs are extra attributes.
func (w *svgWriter) text(x, y float64, attrs, s string) {
	w.printf(`<text x="%s" y="%s"%s>`, num(x), num(y), attrs)
	_ = xml.EscapeText(w, []byte(s))
	w.printf("</text>\n")
}

// num formats a coordinate.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// SVG renders the plot. It fails if no series has a positive point.
func (p plot) SVG() ([]byte, error) {
	xmin, xmax, ymin, ymax, ok := bounds(p.Series)
	if !ok {
		return nil, fmt.Errorf("plot %q: no positive value to show", p.Title)
	}
	xa, ya := newLogAxis(xmin, xmax), newLogAxis(ymin, ymax)
	w := &svgWriter{}
	w.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	w.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	w.text(svgWidth/2, 26, ` text-anchor="middle" font-size="16" font-weight="bold"`, p.Title)
	w.text(svgWidth/2, 46, ` text-anchor="middle" fill="#555555"`, p.Subtitle)
	p.axes(w, xa, ya)
	for i, s := range p.Series {
		p.curve(w, xa, ya, s, i)
	}
	p.legend(w)
	w.printf("</svg>\n")
	return w.Bytes(), nil
}

// axes draws the frame, the grid at each tick, the ticks' labels and the
// axes' titles.
func (p plot) axes(w *svgWriter, xa, ya logAxis) {
	w.printf(`<g class="grid" stroke="#e3e3e3" stroke-width="1">` + "\n")
	for _, t := range xa.ticks() {
		x := xa.pos(t, areaLeft, areaRight)
		w.printf(`<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", num(x), areaTop, num(x), areaBottom)
	}
	for _, t := range ya.ticks() {
		y := ya.pos(t, areaBottom, areaTop)
		w.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", areaLeft, num(y), areaRight, num(y))
	}
	w.printf("</g>\n")
	w.printf(`<rect class="area" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333333"/>`+"\n",
		areaLeft, areaTop, areaRight-areaLeft, areaBottom-areaTop)
	w.printf(`<g class="xticks" text-anchor="middle">` + "\n")
	for _, t := range xa.ticks() {
		x := xa.pos(t, areaLeft, areaRight)
		w.printf(`<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#333333"/>`+"\n", num(x), areaBottom, num(x), areaBottom+5)
		w.text(x, areaBottom+19, "", tickLabel(t))
	}
	w.printf("</g>\n")
	w.printf(`<g class="yticks" text-anchor="end">` + "\n")
	for _, t := range ya.ticks() {
		y := ya.pos(t, areaBottom, areaTop)
		w.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#333333"/>`+"\n", areaLeft-5, num(y), areaLeft, num(y))
		w.text(areaLeft-8, y+4, "", tickLabel(t))
	}
	w.printf("</g>\n")
	w.text((areaLeft+areaRight)/2, areaBottom+44, ` text-anchor="middle"`, p.XLabel)
	cy := float64(areaTop+areaBottom) / 2
	w.text(22, cy, fmt.Sprintf(` text-anchor="middle" transform="rotate(-90 22 %s)"`, num(cy)), p.YLabel)
}

// curve draws one series: a line through the medians, a bar from the
// smallest to the largest run where there are several, and a marker at
// each median with a tooltip that gives the figures.
func (p plot) curve(w *svgWriter, xa, ya logAxis, s series, i int) {
	style := palette[styleOf(s.Name, i)]
	w.printf(`<g class="series" stroke="%s" fill="%s">`+"\n", style.color, style.color)
	var line []byte
	for _, pt := range s.Points {
		if pt.X <= 0 || pt.Y.Min <= 0 {
			continue
		}
		x, y := xa.pos(pt.X, areaLeft, areaRight), ya.pos(pt.Y.Median, areaBottom, areaTop)
		line = fmt.Appendf(line, "%s,%s ", num(x), num(y))
		if pt.Y.N > 1 && pt.Y.Max > pt.Y.Min {
			lo, hi := ya.pos(pt.Y.Min, areaBottom, areaTop), ya.pos(pt.Y.Max, areaBottom, areaTop)
			w.printf(`<path class="spread" d="M%s %sV%sM%s %sH%sM%s %sH%s" stroke-width="1.2" stroke-opacity="0.7" fill="none"/>`+"\n",
				num(x), num(lo), num(hi), num(x-4), num(lo), num(x+4), num(x-4), num(hi), num(x+4))
		}
	}
	if len(line) > 0 {
		w.printf(`<polyline points="%s" fill="none" stroke-width="2"/>`+"\n", bytes.TrimSpace(line))
	}
	for _, pt := range s.Points {
		if pt.X <= 0 || pt.Y.Min <= 0 {
			continue
		}
		x, y := xa.pos(pt.X, areaLeft, areaRight), ya.pos(pt.Y.Median, areaBottom, areaTop)
		w.printf(`<g class="pt" transform="translate(%s %s)">`, num(x), num(y))
		marker(w, style.marker)
		w.printf("<title>")
		_ = xml.EscapeText(w, []byte(tooltip(s.Name, pt, p.YUnit)))
		w.printf("</title></g>\n")
	}
	w.printf("</g>\n")
}

// tooltip describes a point: its series, S, median and spread.
func tooltip(name string, pt point, unit string) string {
	s := fmt.Sprintf("%s, S = %s: %s %s", name, groupDigits(pt.X), figure(pt.Y.Median), unit)
	if pt.Y.N > 1 {
		s += fmt.Sprintf(" (median of %d, %s–%s)", pt.Y.N, figure(pt.Y.Min), figure(pt.Y.Max))
	}
	return s
}

// marker draws a marker shape centered on the origin.
func marker(w *svgWriter, shape string) {
	switch shape {
	case "square":
		w.printf(`<rect x="-3.5" y="-3.5" width="7" height="7"/>`)
	case "diamond":
		w.printf(`<path d="M0 -5L5 0L0 5L-5 0Z"/>`)
	case "triangle":
		w.printf(`<path d="M0 -5L4.5 3.5L-4.5 3.5Z"/>`)
	default:
		w.printf(`<circle r="4"/>`)
	}
}

// legend names each series beside its line and marker, and says what
// the bars are.
func (p plot) legend(w *svgWriter) {
	w.printf(`<g class="legend">` + "\n")
	y := float64(areaTop + 10)
	spread := false
	for i, s := range p.Series {
		style := palette[styleOf(s.Name, i)]
		w.printf(`<g stroke="%s" fill="%s"><line x1="%d" y1="%s" x2="%d" y2="%s" stroke-width="2"/>`,
			style.color, style.color, legendX, num(y), legendX+24, num(y))
		w.printf(`<g transform="translate(%d %s)">`, legendX+12, num(y))
		marker(w, style.marker)
		w.printf("</g></g>\n")
		w.text(legendX+32, y+4, "", s.Name)
		y += 22
		for _, pt := range s.Points {
			spread = spread || pt.Y.N > 1
		}
	}
	if spread {
		w.text(legendX, y+8, ` fill="#555555"`, "points: median of the runs")
		w.text(legendX, y+24, ` fill="#555555"`, "bars: smallest to largest")
	}
	w.printf("</g>\n")
}
