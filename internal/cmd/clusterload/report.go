package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mercurekit/mercure/internal/seqcheck"
)

// report is what a run measured.
type report struct {
	kind             string
	durable          bool
	lag              time.Duration // -lag
	subs, rate, hubs int
	events           []string // -events
	elapsed          time.Duration
	// acked counts the updates acknowledged, refused the attempts
	// refused or timed out (each sent again), stored the events in the
	// store's history, extra those of them never acknowledged.
	acked, refused, stored, extra int
	// lost are the updates acknowledged but not in the store's history,
	// duplicated those in it twice.
	lost, duplicated []string
	stats            []eventStats
	sum              seqcheck.Result
	ends             int // streams a hub ended
	moved            int // subscribers' moves to another hub, their own dead
	// p50 and p99 are the quantiles of the deliveries' latencies (see
	// latencies), over the run; deliveries how many there were.
	p50, p99   time.Duration
	deliveries int64
	// rssBase is hub B's RSS before its pause, rssPeak its peak and
	// rssBound what the peak may reach.
	rssBase, rssPeak, rssBound int64
}

// failures returns why the run failed: none if it passed. Without
// -durable, a failover may lose acknowledged updates (the replica
// promoted lacked them): they are counted, not failed on.
func (r *report) failures() []string {
	var f []string
	if !r.sum.OK() {
		f = append(f, fmt.Sprintf("subscribers: %d lost silently, %d duplicates, %d unknown, %d missing",
			r.sum.LostSilently, r.sum.Duplicates, r.sum.Unknown, r.sum.Missing))
	}
	if len(r.lost) > 0 && (r.durable || !failoverKind(r.kind)) {
		f = append(f, fmt.Sprintf("%d acknowledged updates lost (%s)", len(r.lost), sample(r.lost)))
	}
	f = append(f, r.lagFailures()...)
	if len(r.duplicated) > 0 {
		f = append(f, fmt.Sprintf("%d updates in the store twice (%s)", len(r.duplicated), sample(r.duplicated)))
	}
	if r.extra > 0 {
		f = append(f, fmt.Sprintf("%d updates in the store never acknowledged", r.extra))
	}
	for _, s := range r.stats[1:] {
		if s.recovered < 0 {
			f = append(f, s.name+": no publish sent after it was acknowledged")
		}
	}
	if r.rssBase > 0 && r.rssPeak > r.rssBound {
		f = append(f, fmt.Sprintf("hub B's RSS peaked at %d MiB, past its bound of %d MiB", r.rssPeak>>20, r.rssBound>>20))
	}
	return f
}

// lagFailures returns why the lag (-lag) did not do what it is for: a
// replica that lags loses, at the failover, the updates the primary
// acknowledged meanwhile; with -durable, no update is acknowledged
// meanwhile, as no replica has it. Either failure says the replica did
// not lag.
func (r *report) lagFailures() []string {
	if r.lag <= 0 {
		return nil
	}
	if !r.durable {
		if len(r.lost) == 0 {
			return []string{"-lag: the failover lost no acknowledged update: the replica did not lag"}
		}
		return nil
	}
	for i, s := range r.stats {
		if s.name != "lag" || i+1 == len(r.stats) {
			continue
		}
		if next := r.stats[i+1]; s.recovered >= 0 && s.at.Add(s.recovered).Before(next.at) {
			return []string{fmt.Sprintf("-durable -lag: a publish sent during the lag was acknowledged %s into it, before the %s: a replica acknowledged it",
				seconds(s.recovered), next.name)}
		}
	}
	return nil
}

// sample returns the first few of ids, for a message.
func sample(ids []string) string {
	if len(ids) > 5 {
		return strings.Join(ids[:5], " ") + " …"
	}
	return strings.Join(ids, " ")
}

// print writes the report for a reader, then the result line.
func (r *report) print(w io.Writer) {
	mode := ""
	if r.durable {
		mode = " -durable"
	}
	if r.lag > 0 {
		mode += " -lag " + r.lag.String()
	}
	fmt.Fprintf(w, "store %s%s, %d hubs, events %s: %d subscribers, %d updates acknowledged in %v (%.0f/s of %d/s offered; %d publishes refused, sent again), %d in the store\n",
		r.kind, mode, r.hubs, r.eventList(), r.subs, r.acked, r.elapsed.Round(time.Second), r.ackRate(), r.rate, r.refused, r.stored)
	fmt.Fprintf(w, "delivery latency (first POST to a subscriber's read) p50 %s, p99 %s, over %d deliveries; subscribers moved off a dead hub %d\n",
		millis(r.p50), millis(r.p99), r.deliveries, r.moved)
	fmt.Fprintf(w, "acknowledged but not in the store (lost) %d, in the store twice %d, in the store but never acknowledged %d\n",
		len(r.lost), len(r.duplicated), r.extra)
	fmt.Fprintf(w, "delivered %d, streams ended by a hub %d, resumes answered with another cursor %d (updates skipped at them %d, received again %d), events received that the store lost %d\n",
		r.sum.Delivered, r.ends, r.sum.Gaps, r.sum.LostWithGap, r.sum.Redelivered, r.sum.Vanished)
	fmt.Fprintf(w, "lost silently %d, duplicates %d, unknown %d, missing %d\n", r.sum.LostSilently, r.sum.Duplicates, r.sum.Unknown, r.sum.Missing)
	if r.rssBase > 0 {
		fmt.Fprintf(w, "hub B RSS: %d MiB before the pause, peak %d MiB, bound %d MiB\n", r.rssBase>>20, r.rssPeak>>20, r.rssBound>>20)
	} else {
		fmt.Fprintf(w, "hub B RSS: peak %d MiB\n", r.rssPeak>>20)
	}
	for _, e := range r.sum.Errors {
		fmt.Fprintln(w, "  ", e)
	}
	for _, s := range r.stats {
		fmt.Fprintln(w, s.describe(r.stats[0].at))
	}
	for _, f := range r.failures() {
		fmt.Fprintln(w, "FAIL:", f)
	}
	fmt.Fprintln(w, r.line())
}

// describe says what the event cost, its time counted from start.
func (s eventStats) describe(start time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s at %5.1fs", s.name, s.at.Sub(start).Seconds())
	if s.span > 0 {
		fmt.Fprintf(&b, " for %v", s.span)
	}
	if s.name != "warm-up" {
		who := "publishing"
		if s.hub != "" {
			who = "hub " + s.hub + "'s publishing"
		}
		fmt.Fprintf(&b, ": %s back after %s", who, seconds(s.recovered))
		if s.span > 0 && s.recovered >= s.span {
			fmt.Fprintf(&b, " (%s after %s)", seconds(s.recovered-s.span), s.end())
		}
		fmt.Fprintf(&b, ", %d attempts refused meanwhile", s.refused)
	}
	fmt.Fprintf(&b, "; until the next: %d acknowledged, %d lost, %d duplicated, %d gaps reported, delivery p99 %s",
		s.acked, s.lost, s.duplicated, s.gaps, millis(s.p99))
	return b.String()
}

// end names the end of the event's span.
func (e event) end() string {
	switch {
	case e.name == "hub-kill":
		return "the restart"
	case e.hub != "":
		return "SIGCONT"
	case e.name == "lag":
		return "the lag's end"
	}
	return "the restart"
}

// seconds formats d in seconds, "never" for a negative d.
func seconds(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// line returns the run's result on one line of key=value fields, from
// which a table is built: the totals, then each event's, prefixed with
// its name.
func (r *report) line() string {
	f := []string{"result", "store=" + r.kind, fmt.Sprintf("durable=%v", r.durable), "lag=" + r.lag.String(),
		fmt.Sprintf("hubs=%d", r.hubs), "events=" + r.eventList(),
		fmt.Sprintf("subs=%d", r.subs), fmt.Sprintf("rate=%d", r.rate), fmt.Sprintf("seconds=%.0f", r.elapsed.Seconds()),
		fmt.Sprintf("acked=%d", r.acked), fmt.Sprintf("acked-per-s=%.0f", r.ackRate()),
		"delivery-p50-ms=" + strings.TrimSuffix(millis(r.p50), "ms"), "delivery-p99-ms=" + strings.TrimSuffix(millis(r.p99), "ms"),
		fmt.Sprintf("moved=%d", r.moved), fmt.Sprintf("refused=%d", r.refused), fmt.Sprintf("stored=%d", r.stored),
		fmt.Sprintf("lost=%d", len(r.lost)), fmt.Sprintf("duplicated=%d", len(r.duplicated)),
		fmt.Sprintf("gaps=%d", r.sum.Gaps), fmt.Sprintf("vanished=%d", r.sum.Vanished),
		fmt.Sprintf("lost-silently=%d", r.sum.LostSilently), fmt.Sprintf("duplicates=%d", r.sum.Duplicates),
		fmt.Sprintf("unknown=%d", r.sum.Unknown), fmt.Sprintf("missing=%d", r.sum.Missing)}
	for _, s := range r.stats {
		p := s.name + "."
		if s.name != "warm-up" {
			f = append(f, p+"recover="+strings.TrimSuffix(seconds(s.recovered), "s"), fmt.Sprintf("%srefused=%d", p, s.refused))
		}
		f = append(f, fmt.Sprintf("%sacked=%d", p, s.acked), fmt.Sprintf("%slost=%d", p, s.lost),
			fmt.Sprintf("%sduplicated=%d", p, s.duplicated), fmt.Sprintf("%sgaps=%d", p, s.gaps),
			p+"p99-ms="+strings.TrimSuffix(millis(s.p99), "ms"))
	}
	f = append(f, fmt.Sprintf("rss-peak-mib=%d", r.rssPeak>>20), fmt.Sprintf("ok=%v", len(r.failures()) == 0))
	return strings.Join(f, " ")
}

// eventList returns -events, "none" for none.
func (r *report) eventList() string {
	if len(r.events) == 0 {
		return "none"
	}
	return strings.Join(r.events, ",")
}

// ackRate returns the updates acknowledged per second of traffic.
func (r *report) ackRate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.acked) / r.elapsed.Seconds()
}

// latency takes the deliveries' latencies from lat: over the run, which
// ended at end, and for each event's window.
func (r *report) latency(lat *latencies, end time.Time) {
	if len(r.stats) == 0 {
		return
	}
	// A window holds the seconds from its start's to before its end's:
	// the last, that of the traffic's end too.
	start, end := r.stats[0].at, end.Add(time.Second)
	r.p50, r.deliveries = lat.quantile(start, end, 0.5)
	r.p99, _ = lat.quantile(start, end, 0.99)
	for i := range r.stats {
		to := end
		if i+1 < len(r.stats) {
			to = r.stats[i+1].at
		}
		r.stats[i].p99, _ = lat.quantile(r.stats[i].at, to, 0.99)
	}
}

// millis formats d in milliseconds.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}
