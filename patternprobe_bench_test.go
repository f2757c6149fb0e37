//go:build unix

package mercure_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mercurekit/mercure"
)

// BenchmarkAnonymousPatternProbe is the probe of issue 41, item 3: what
// the URL patterns of anonymous streams add to the CPU that the hub
// spends on publishes that none of them selects. Two hubs run side by
// side in one process: one with a marker stream only, the other with 64
// more anonymous streams, the N-th with its own URL pattern
// https://:h/:a/:b/:c/:d/:e/:f/xN (or, for the legacy variants, the URI
// template https://{h}/{a}/{b}/{c}/{d}/{e}/{f}/xN as a topic= selector).
// Each op publishes, on each hub in turn, 100 updates of the given number
// of topics of about 650 bytes, over HTTP, and waits for the marker
// update after them, which the dispatcher reaches last: matching is done
// by then. The topics have eight path segments, the last never xN, so
// nothing is delivered to the 64 streams: what they add is the pure cost
// of matching. The unselective variant opens as many streams as the hub
// accepts of https://*/*zN*, which every topic's literal text passes: what
// is left to the pattern budgets. It reports the streams accepted, the
// process's CPU time (user and system) per 100 updates for each hub, and
// their ratio, measured in the same run:
//
//	go test -run '^$' -bench AnonymousPatternProbe -benchtime 5x .
//
// The figures are a ratio within one run on purpose: the machine may be
// shared, and absolute times vary from one run to the next.
func BenchmarkAnonymousPatternProbe(b *testing.B) {
	pattern := func(i int) string {
		return "match_urlpattern=" + url.QueryEscape(fmt.Sprintf("https://:h/:a/:b/:c/:d/:e/:f/x%d", i))
	}
	template := func(i int) string {
		return "topic=" + url.QueryEscape(fmt.Sprintf("https://{h}/{a}/{b}/{c}/{d}/{e}/{f}/x%d", i))
	}
	// What the hub cannot set aside: a pattern whose literal text every
	// topic passes runs its regular expressions (see
	// PatternLimits.MaxSizePerTopic).
	regexp := func(i int) string {
		return "match_urlpattern=" + url.QueryEscape(fmt.Sprintf("https://*/*z%d*", i))
	}
	for _, c := range []struct {
		name    string
		topics  int
		legacy  bool
		pattern func(int) string
	}{
		{"urlpattern/topics=64", 64, false, pattern},
		{"urlpattern/topics=1", 1, false, pattern},
		{"uritemplate/topics=64", 64, true, template},
		{"uritemplate/topics=1", 1, true, template},
		{"unselective/topics=64", 64, false, regexp},
	} {
		b.Run(c.name, func(b *testing.B) {
			bare, _ := newProbeHub(b, c.legacy, 0, nil)
			with, streams := newProbeHub(b, c.legacy, 64, c.pattern)
			bodies := probeBodies(c.topics, 100)
			var bareCPU, withCPU time.Duration
			for b.Loop() {
				bareCPU += bare.run(b, bodies)
				withCPU += with.run(b, bodies)
			}
			n := float64(b.N)
			b.ReportMetric(float64(streams), "streams")
			b.ReportMetric(bareCPU.Seconds()*1000/n, "bare-cpu-ms")
			b.ReportMetric(withCPU.Seconds()*1000/n, "with-cpu-ms")
			b.ReportMetric(float64(withCPU)/float64(bareCPU), "ratio")
		})
	}
}

// probeHub is a hub of the probe and its marker stream.
type probeHub struct {
	th     *testHub
	marker *subscription
}

// newProbeHub starts a hub with a marker stream and up to n anonymous
// streams, the i-th subscribing with the query query(i) (in the
// compatibility mode with legacy); it returns the hub and the number of
// streams the hub accepted.
func newProbeHub(b *testing.B, legacy bool, n int, query func(i int) string) (*probeHub, int) {
	opts := []mercure.Option{
		withHistory(b, 256),
		mercure.WithLimits(mercure.Limits{MaxPendingUpdates: 256}),
		mercure.WithLogger(slog.New(slog.DiscardHandler)),
	}
	if legacy {
		opts = append(opts, mercure.WithLegacyClients(mercure.LegacyClients{}))
	}
	th := newTestHub(b, opts...)
	accepted := 0
	for i := range n {
		if s, res := th.trySubscribe(http.MethodGet, query(i), ""); s != nil {
			accepted++
		} else {
			res.Body.Close()
		}
	}
	return &probeHub{th: th, marker: th.subscribe("match=urn%3Aprobe%3Amarker")}, accepted
}

// probeBodies returns the form bodies of updates updates of topics topics
// each, about 650 bytes a topic, all distinct, none ending in xN.
func probeBodies(topics, updates int) []string {
	bodies := make([]string, updates)
	pad := strings.Repeat("p", 600)
	for u := range bodies {
		var body strings.Builder
		for t := range topics {
			fmt.Fprintf(&body, "topic=%s&", url.QueryEscape(fmt.Sprintf("https://example.com/a/b/c/d/e/f/%s/u%dt%d", pad, u, t)))
		}
		body.WriteString("data=x")
		bodies[u] = body.String()
	}
	return bodies
}

// run publishes bodies, then the marker, waits for the marker and returns
// the CPU time the process spent meanwhile.
func (p *probeHub) run(b *testing.B, bodies []string) time.Duration {
	start := cpuTime(b)
	for _, body := range bodies {
		p.th.mustPost(body)
	}
	p.th.mustPost("topic=urn%3Aprobe%3Amarker&data=m")
	p.marker.next(b)
	return cpuTime(b) - start
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
