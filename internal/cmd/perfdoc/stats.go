package main

import (
	"slices"
)

// summary is what several runs of one measurement give: the median, which
// plots and tables show, and the spread around it.
type summary struct {
	Min, Median, Max float64
	N                int
}

// summarize returns the summary of vs (the zero summary if vs is empty).
// The median of an even count is the mean of the two middle values.
func summarize(vs []float64) summary {
	if len(vs) == 0 {
		return summary{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return summary{Min: s[0], Median: med, Max: s[n-1], N: n}
}

// point is one measurement at one S, over its runs.
type point struct {
	X float64 // S
	Y summary
}

// series is one curve: a hub (or a simulated scenario) across S.
type series struct {
	Name   string
	Points []point // by increasing X
}

// group gathers values by label and S into series, labels in display
// order and points by increasing S. value reports false for a run that
// has no value to show.
func group[T any](items []T, label func(T) string, subs func(T) int, value func(T) (float64, bool)) []series {
	type key struct {
		label string
		subs  int
	}
	values := map[key][]float64{}
	var keys []key
	for _, it := range items {
		v, ok := value(it)
		if !ok {
			continue
		}
		k := key{label(it), subs(it)}
		if _, seen := values[k]; !seen {
			keys = append(keys, k)
		}
		values[k] = append(values[k], v)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := hubOrder(a.label, b.label); c != 0 {
			return c
		}
		return a.subs - b.subs
	})
	var out []series
	for _, k := range keys {
		if len(out) == 0 || out[len(out)-1].Name != k.label {
			out = append(out, series{Name: k.label})
		}
		s := &out[len(out)-1]
		s.Points = append(s.Points, point{X: float64(k.subs), Y: summarize(values[k])})
	}
	return out
}

// at returns the point of s at S = x.
func (s series) at(x float64) (point, bool) {
	for _, p := range s.Points {
		if p.X == x {
			return p, true
		}
	}
	return point{}, false
}

// xs returns every S that some series has a point at, in increasing order.
func xs(ss []series) []float64 {
	var out []float64
	for _, s := range ss {
		for _, p := range s.Points {
			out = append(out, p.X)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
