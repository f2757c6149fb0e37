// Command simscale drives a hub's stream engine with in-memory
// connections (internal/simconn): no sockets, so no descriptor limit, and
// a million subscribers fit in one process (issue 42, item 3). It builds
// the hub in process (mercure.New, anonymous subscribers, publishing
// without a token, every limit that would refuse the subscribers
// raised), opens each subscriber by calling the hub's handler with a
// ResponseWriter whose Hijack returns an in-memory connection, and
// measures, for each scenario and each number of subscribers:
//
//	fanout      every subscriber on one topic; K updates to it
//	exact       every subscriber on a topic of its own; N updates, each to one
//	urlpattern  every subscriber on a URL pattern of its own
//	            (match_urlpattern=https://bench.example/items/{i}/:id);
//	            N updates, each to one
//
// For example:
//
//	go run ./internal/cmd/simscale -subs 10000,100000,1000000 -json docs/perf/sim.jsonl
//
// It appends one JSON object per (scenario, subscribers) to the -json
// file (JSON Lines) and prints a line of it. The fields, stable for the
// scripts that plot them:
//
//	scenario               fanout, exact or urlpattern
//	subs                   subscribers open
//	heap_per_sub_b         live heap per subscriber (after two collections;
//	                       the in-memory connections, allocated before, excluded)
//	stack_per_sub_b        goroutine stacks per subscriber
//	goroutines             goroutines with the subscribers open
//	subscribe_us_per_sub   wall time to open the subscribers, per subscriber
//	subscribe_cpu_us_per_sub  process CPU time (user+system) to open them, per subscriber
//	updates                updates published
//	deliveries             events the connections received
//	cpu_per_delivery_us    process CPU per delivery (fanout)
//	cpu_per_update_us      process CPU per update (all; for exact and
//	                       urlpattern, each update is one delivery)
//	wall_s                 from the first publish to the last delivery
//	idle_s                 a window while the subscribers idle
//	idle_cpu_ms_per_s      process CPU per second of it (keep-alive sweeps)
//	probe_max_us, probe_p99_us  latency of a subscribe (and its end) while
//	                       the subscribers idle, sampled over another
//	                       idle_s seconds: what a walk under an engine-wide
//	                       lock stalls
//	shutdown_s             Hub.Shutdown with the subscribers open
//	overflows              streams ended because they fell behind (0 expected)
//	keepalive_s            Limits.KeepAlive
//	go_version, gomaxprocs, date
//
// -cpuprofile PREFIX writes a CPU profile of each run to
// PREFIX-SCENARIO-SUBS.pprof.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/simconn"
)

const hubURL = "https://bench.example" + mercure.DefaultHubPath

// result is one line of the -json file: see the package doc.
type result struct {
	Scenario          string  `json:"scenario"`
	Subs              int     `json:"subs"`
	HeapPerSub        float64 `json:"heap_per_sub_b"`
	StackPerSub       float64 `json:"stack_per_sub_b"`
	Goroutines        int     `json:"goroutines"`
	SubscribeUS       float64 `json:"subscribe_us_per_sub"`
	SubscribeCPUUS    float64 `json:"subscribe_cpu_us_per_sub"`
	Updates           int     `json:"updates"`
	Deliveries        int64   `json:"deliveries"`
	CPUPerDeliveryUS  float64 `json:"cpu_per_delivery_us"`
	CPUPerUpdateUS    float64 `json:"cpu_per_update_us"`
	WallS             float64 `json:"wall_s"`
	ProbeMaxUS        float64 `json:"probe_max_us"`
	ProbeP99US        float64 `json:"probe_p99_us"`
	IdleS             float64 `json:"idle_s"`
	IdleCPUMSPerS     float64 `json:"idle_cpu_ms_per_s"`
	ShutdownS         float64 `json:"shutdown_s"`
	Overflows         uint64  `json:"overflows"`
	KeepAliveS        float64 `json:"keepalive_s"`
	GoVersion         string  `json:"go_version"`
	GOMAXPROCS        int     `json:"gomaxprocs"`
	Date              string  `json:"date"`
	SubscribeFailures int64   `json:"subscribe_failures,omitempty"`
}

type options struct {
	updates, selective, workers, dataSize int
	idle, keepAlive, timeout              time.Duration
	cpuProfile                            string
}

func main() {
	subs := flag.String("subs", "10000,100000,1000000", "numbers of subscribers, comma-separated")
	scenarios := flag.String("scenarios", "fanout,exact,urlpattern", "scenarios, comma-separated")
	jsonFile := flag.String("json", "", "append the results to this file (JSON Lines)")
	var o options
	flag.IntVar(&o.updates, "updates", 10, "fanout: updates published to every subscriber")
	flag.IntVar(&o.selective, "selective", 20000, "exact, urlpattern: updates published, each to one subscriber")
	flag.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "goroutines opening subscribers")
	flag.IntVar(&o.dataSize, "data", 100, "bytes of data per update")
	flag.DurationVar(&o.idle, "idle", 4*time.Second, "idle window, probed (see probe_max_us)")
	flag.DurationVar(&o.keepAlive, "keepalive", 15*time.Second, "Limits.KeepAlive")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on a delivery phase after this long")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of each run to PREFIX-SCENARIO-SUBS.pprof")
	flag.Parse()

	var out io.Writer = io.Discard
	if *jsonFile != "" {
		f, err := os.OpenFile(*jsonFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		out = f
	}
	for _, sc := range strings.Split(*scenarios, ",") {
		for _, field := range strings.Split(*subs, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(field))
			if err != nil || n <= 0 {
				log.Fatalf("bad -subs %q", field)
			}
			r, err := run(sc, n, o)
			if err != nil {
				log.Fatalf("%s %d: %v", sc, n, err)
			}
			line, _ := json.Marshal(r)
			fmt.Fprintf(out, "%s\n", line)
			fmt.Printf("%-10s subs=%-8d heap/sub=%6.0fB stack/sub=%4.0fB gor=%-5d subscribe=%6.2fus(cpu %6.2fus) cpu/delivery=%6.3fus cpu/update=%8.2fus wall=%6.2fs probe max=%7.0fus p99=%6.0fus idle cpu=%5.1fms/s shutdown=%5.2fs overflows=%d\n",
				r.Scenario, r.Subs, r.HeapPerSub, r.StackPerSub, r.Goroutines, r.SubscribeUS, r.SubscribeCPUUS, r.CPUPerDeliveryUS, r.CPUPerUpdateUS, r.WallS, r.ProbeMaxUS, r.ProbeP99US, r.IdleCPUMSPerS, r.ShutdownS, r.Overflows)
		}
	}
}

// scenario says what each subscriber asks for and where updates go.
type scenario struct {
	query func(i int) string // the subscribe request's query
	topic func(i int) string // the topic of an update to subscriber i
	fan   bool               // every update reaches every subscriber
}

var scenarios = map[string]scenario{
	"fanout": {
		query: func(int) string { return "match=" + url.QueryEscape("https://bench.example/fanout") },
		topic: func(int) string { return "https://bench.example/fanout" },
		fan:   true,
	},
	"exact": {
		query: func(i int) string { return "match=" + url.QueryEscape("https://bench.example/s/"+strconv.Itoa(i)) },
		topic: func(i int) string { return "https://bench.example/s/" + strconv.Itoa(i) },
	},
	"urlpattern": {
		query: func(i int) string {
			return "match_urlpattern=" + url.QueryEscape("https://bench.example/items/"+strconv.Itoa(i)+"/:id")
		},
		topic: func(i int) string { return "https://bench.example/items/" + strconv.Itoa(i) + "/x" },
	},
}

func run(name string, n int, o options) (result, error) {
	sc, ok := scenarios[name]
	if !ok {
		return result{}, fmt.Errorf("unknown scenario %q", name)
	}
	r := result{Scenario: name, Subs: n, KeepAliveS: o.keepAlive.Seconds(), GoVersion: runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), Date: time.Now().UTC().Format(time.RFC3339)}
	hub, err := mercure.New(hubURL,
		mercure.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		mercure.WithAnonymousSubscribers(), mercure.WithInsecurePublishing(),
		mercure.WithLimits(mercure.Limits{
			MaxConnections:          2*n + 1000,
			MaxAnonymousConnections: 2*n + 1000,
			MaxTotalPatternSize:     1 << 30,
			KeepAlive:               o.keepAlive,
		}))
	if err != nil {
		return r, err
	}
	var total simconn.Counts
	conns := make([]*simconn.Conn, n)
	for i := range conns {
		conns[i] = simconn.New(&total)
	}
	stopProfile := startProfile(o.cpuProfile, name, n)
	defer stopProfile()

	heap0, stack0 := memStats()
	cpu0, t0 := cpuTime(), time.Now()
	failures := subscribe(hub, sc, conns, o.workers)
	subWall, subCPU := time.Since(t0), cpuTime()-cpu0
	r.SubscribeFailures = failures
	if failures > 0 {
		return r, fmt.Errorf("%d subscribe requests refused", failures)
	}
	heap1, stack1 := memStats()
	r.HeapPerSub = float64(int64(heap1)-int64(heap0)) / float64(n)
	r.StackPerSub = float64(int64(stack1)-int64(stack0)) / float64(n)
	r.Goroutines = runtime.NumGoroutine()
	r.SubscribeUS = us(subWall) / float64(n)
	r.SubscribeCPUUS = us(subCPU) / float64(n)

	probeIdle(hub, o.idle, &r)

	data := strings.Repeat("d", o.dataSize)
	events0 := total.Events.Load()
	var want int64
	var targets []int
	if sc.fan {
		r.Updates = o.updates
		want = int64(n) * int64(o.updates)
		targets = make([]int, o.updates)
	} else {
		r.Updates = o.selective
		want = int64(o.selective)
		targets = make([]int, o.selective)
		for i := range targets {
			targets[i] = rand.IntN(n)
		}
	}
	cpu0, t0 = cpuTime(), time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	for _, i := range targets {
		if _, err := hub.Publish(ctx, mercure.Update{Topics: []string{sc.topic(i)}, Data: data}); err != nil {
			cancel()
			return r, fmt.Errorf("publish: %w", err)
		}
	}
	for total.Events.Load()-events0 < want && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	cancel()
	r.WallS = time.Since(t0).Seconds()
	cpu := cpuTime() - cpu0
	r.Deliveries = total.Events.Load() - events0
	if r.Deliveries < want {
		return r, fmt.Errorf("%d deliveries of %d after %v", r.Deliveries, want, o.timeout)
	}
	r.CPUPerDeliveryUS = us(cpu) / float64(r.Deliveries)
	r.CPUPerUpdateUS = us(cpu) / float64(r.Updates)
	r.Overflows = hub.Metrics().Overflows

	t0 = time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), o.timeout)
	defer scancel()
	if err := hub.Shutdown(sctx); err != nil {
		return r, fmt.Errorf("shutdown: %w", err)
	}
	r.ShutdownS = time.Since(t0).Seconds()
	if open := total.Open.Load(); open != 0 {
		return r, fmt.Errorf("%d connections left open after Shutdown", open)
	}
	return r, nil
}

// subscribe opens a subscriber on each of conns, from workers goroutines,
// and returns how many were refused.
func subscribe(hub *mercure.Hub, sc scenario, conns []*simconn.Conn, workers int) (failures int64) {
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(conns) {
					return
				}
				if !open(hub, sc.query(i), conns[i]) {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return failed.Load()
}

// open opens one subscriber with query on conn, as net/http would hand
// the request to the hub, and reports whether its stream started.
func open(hub *mercure.Hub, query string, conn *simconn.Conn) bool {
	u := &url.URL{Path: mercure.DefaultHubPath, RawQuery: query}
	req := &http.Request{
		Method: http.MethodGet, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Host: "bench.example", RemoteAddr: "192.0.2.1:1234", RequestURI: u.RequestURI(),
	}
	w := simconn.NewResponseWriter(conn)
	hub.ServeHTTP(w, req)
	return w.Status == http.StatusOK
}

// probeIdle records the process's CPU while the subscribers idle for
// idle, then opens and ends a subscriber of its own topic, one after the
// other, for as long again, and records the latency of each.
func probeIdle(hub *mercure.Hub, idle time.Duration, r *result) {
	if idle <= 0 {
		return
	}
	cpu0, t0 := cpuTime(), time.Now()
	time.Sleep(idle)
	r.IdleS = time.Since(t0).Seconds()
	r.IdleCPUMSPerS = float64(cpuTime()-cpu0) / float64(time.Millisecond) / r.IdleS

	var lat []time.Duration
	var total simconn.Counts
	t1 := time.Now()
	for i := 0; time.Since(t1) < idle; i++ {
		c := simconn.New(&total)
		start := time.Now()
		if !open(hub, "match="+url.QueryEscape("https://bench.example/probe/"+strconv.Itoa(i)), c) {
			log.Fatal("a probe subscriber was refused")
		}
		c.Leave()
		for total.Open.Load() > 0 {
			runtime.Gosched()
		}
		lat = append(lat, time.Since(start))
		time.Sleep(2 * time.Millisecond)
	}
	slices.Sort(lat)
	r.ProbeMaxUS = us(lat[len(lat)-1])
	r.ProbeP99US = us(lat[len(lat)*99/100])
}

// memStats returns the live heap and the stacks in use, after two
// collections.
func memStats() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// startProfile starts a CPU profile of one run when prefix is set, and
// returns what stops it.
func startProfile(prefix, scenario string, n int) func() {
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s-%s-%d.pprof", prefix, scenario, n))
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
