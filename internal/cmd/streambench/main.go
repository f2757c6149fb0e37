// Command streambench measures what loadgen (../shared/loadgen) cannot:
// streams over TLS (HTTP/1.1 and HTTP/2), the live heap per stream, and
// the stalled-reader attack (see docs/performance.md). It is both the hub
// and the clients, in two processes:
//
//	streambench serve -addr 127.0.0.1:8443 -tls -stats 127.0.0.1:6060 &
//	streambench idle -url https://127.0.0.1:8443/.well-known/mercure -h2 -n 2000 -pubs 200 -pid $! -stats 127.0.0.1:6060
//	streambench idle -url https://127.0.0.1:8443/.well-known/mercure -h2 -share 100 -n 2000 -pid $! -stats "" -json idle.jsonl
//	streambench stall -url http://127.0.0.1:8443/.well-known/mercure -n 1000 -updates 5 -size 1000000 -pid $! -stats 127.0.0.1:6060
//	streambench burst -url http://127.0.0.1:8443/.well-known/mercure -n 400 -healthy 3 -updates 120 -size 262144 -stats 127.0.0.1:6060
//
// serve runs the library's hub in its default configuration (or, with
// -handler floor, no hub: a handler that sends a stream's headers and
// waits, to measure what net/http costs by itself), plus
// anonymous subscribers and publishing without a token, and serves the
// Go runtime's profiles (net/http/pprof) and /stats (the live heap after
// a collection) on -stats. idle opens n streams, reports the hub's RSS
// and live heap per stream, then publishes to all of them and reports
// the hub's CPU time per delivery; -share N opens N streams per client
// (over HTTP/2, one connection: a browser's tabs), -stats "" measures a
// hub without /stats (the standalone: its RSS only), and -json appends
// the figures as one JSON object. stall opens n streams that never read
// and one that does, publishes large updates one at a time, and reports
// the healthy stream's delay per update and the hub's memory. burst opens
// n streams that never read and a few that do, publishes updates as fast
// as the hub accepts them, and reports how many each healthy stream got,
// the streams ended for overflow and how long the publishers took.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	_ "net/http/pprof"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mercurekit/mercure"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: streambench serve|idle|stall|burst [flags]")
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "idle":
		idle(os.Args[2:])
	case "stall":
		stall(os.Args[2:])
	case "burst":
		burst(os.Args[2:])
	default:
		log.Fatalf("unknown command %q", os.Args[1])
	}
}

func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8443", "listen address")
	useTLS := fs.Bool("tls", false, "serve TLS (HTTP/2 and HTTP/1.1 by ALPN) with a self-signed certificate")
	goroutine := fs.Bool("goroutine-streams", false, "mercure.WithGoroutineStreams")
	stats := fs.String("stats", "127.0.0.1:6060", "address serving /stats and /debug/pprof/")
	maxConns := fs.Int("max-connections", 30000, "Limits.MaxConnections")
	profileRate := fs.Int("memprofilerate", 0, "runtime.MemProfileRate (0 keeps Go's default, 1 records every allocation)")
	maxBody := fs.Int64("max-body-bytes", 0, "Limits.MaxBodyBytes (0 keeps the default)")
	handler := fs.String("handler", "hub", "hub: the library's hub; floor: no hub, a handler that sends a stream's headers and waits (net/http's own cost per stream)")
	_ = fs.Parse(args)
	if *profileRate > 0 {
		runtime.MemProfileRate = *profileRate
	}

	scheme := "http"
	if *useTLS {
		scheme = "https"
	}
	opts := []mercure.Option{
		mercure.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		mercure.WithAnonymousSubscribers(), mercure.WithInsecurePublishing(),
		mercure.WithLimits(mercure.Limits{MaxConnections: *maxConns, MaxBodyBytes: *maxBody}),
	}
	if *goroutine {
		opts = append(opts, mercure.WithGoroutineStreams())
	}
	hub, err := mercure.New(scheme+"://"+*addr+mercure.DefaultHubPath, opts...)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	switch *handler {
	case "hub":
		hub.Mount(mux)
	case "floor":
		// What net/http costs alone: the stream's headers, flushed, and
		// a handler that waits as the hub's does.
		mux.HandleFunc("GET "+mercure.DefaultHubPath, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
		})
	default:
		log.Fatalf("-handler %q: want hub or floor", *handler)
	}
	http.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(map[string]uint64{
			"heap_alloc": ms.HeapAlloc, "heap_inuse": ms.HeapInuse, "stack_inuse": ms.StackInuse,
			"sys": ms.Sys, "goroutines": uint64(runtime.NumGoroutine()),
		})
	})
	// The peak of the live heap (as of each collection), sampled.
	var peakLive atomic.Uint64
	go func() {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for range time.Tick(10 * time.Millisecond) {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peakLive.Load() {
				peakLive.Store(v)
			}
		}
	}()
	http.HandleFunc("/hub", func(w http.ResponseWriter, _ *http.Request) {
		m := hub.Metrics()
		_ = json.NewEncoder(w).Encode(map[string]any{
			"streams": m.Streams, "opened": m.StreamsOpened, "closed": m.StreamsClosed, "overflows": m.Overflows,
		})
	})
	http.HandleFunc("/peak", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, peakLive.Swap(0))
	})
	go func() { log.Fatal(http.ListenAndServe(*stats, nil)) }()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	if *useTLS {
		// httptest's certificate is valid for 127.0.0.1: enough on loopback.
		ts := httptest.NewUnstartedServer(nil)
		ts.StartTLS()
		srv.TLSConfig = &tls.Config{Certificates: ts.TLS.Certificates, NextProtos: []string{"h2", "http/1.1"}}
		ts.Close()
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		log.Fatal(srv.ServeTLS(ln, "", ""))
	}
	log.Fatal(srv.Serve(ln))
}

// client returns the HTTP client of one subscriber: its own connection,
// like a distinct browser's.
func client(h2 bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		ForceAttemptHTTP2: h2,
		DisableKeepAlives: false,
		ReadBufferSize:    4 << 10,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr}
}

// procStatus reads a field of /proc/PID/status in KB.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		log.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// cpuTime is the CPU time of process pid so far.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		log.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}

// heapStats reads the hub's /stats; nil without an address (a hub that
// serves none, like the standalone: only its RSS is measured).
func heapStats(addr string) map[string]uint64 {
	if addr == "" {
		return nil
	}
	res, err := http.Get("http://" + addr + "/stats")
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	m := map[string]uint64{}
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		log.Fatal(err)
	}
	return m
}

// counter counts the events of a stream's body: "data:" at the start of
// a line, whatever the reads' split.
type counter struct {
	n    atomic.Int64
	tail []byte
	wake chan struct{}
}

func (c *counter) feed(b []byte) {
	buf := append(c.tail, b...)
	n := bytes.Count(buf, []byte("\ndata:"))
	if n > 0 {
		c.n.Add(int64(n))
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	keep := min(len(buf), 5)
	c.tail = append(c.tail[:0], buf[len(buf)-keep:]...)
}

func idle(args []string) {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	hubURL := fs.String("url", "http://127.0.0.1:8443/.well-known/mercure", "hub URL")
	h2 := fs.Bool("h2", false, "HTTP/2 (needs https)")
	n := fs.Int("n", 1000, "streams")
	pattern := fs.Bool("pattern", false, "each stream matches its own URL pattern instead of one topic")
	pubs := fs.Int("pubs", 0, "updates published to all the streams after the memory figures")
	pid := fs.Int("pid", 0, "the hub's process id")
	stats := fs.String("stats", "127.0.0.1:6060", "the hub's -stats address")
	settle := fs.Duration("settle", 2*time.Second, "pause before reading the memory figures")
	heapProfile := fs.String("heapprofile", "", "save the hub's heap profile (/debug/pprof/heap) with the streams open to this file")
	share := fs.Int("share", 1, "streams per client, as a browser's tabs share its connection (HTTP/2: one connection carries up to the server's stream limit, 250 for net/http)")
	jsonOut := fs.String("json", "", "append the figures to this file as one JSON object (JSON Lines)")
	label := fs.String("label", "", "what was measured, for -json (e.g. standalone, floor)")
	_ = fs.Parse(args)
	if *share < 1 {
		log.Fatal("-share: want 1 or more")
	}
	clients := make([]*http.Client, (*n+*share-1) / *share)
	for i := range clients {
		clients[i] = client(*h2)
	}

	base := heapStats(*stats)
	rss0 := procStatus(*pid, "VmRSS")
	const topic = "https://bench.example/fanout"
	c := &counter{wake: make(chan struct{}, 1)}
	var mu sync.Mutex
	var open sync.WaitGroup
	sem := make(chan struct{}, 64)
	var failed atomic.Int64
	start := time.Now()
	for i := range *n {
		sem <- struct{}{}
		open.Add(1)
		go func() {
			q := "match=" + url.QueryEscape(topic)
			if *pattern {
				q = "match_urlpattern=" + url.QueryEscape(fmt.Sprintf("https://bench.example/items/%d/:id", i)) + "&match=" + url.QueryEscape(topic)
			}
			res, err := clients[i / *share].Get(*hubURL + "?" + q)
			<-sem
			if err != nil || res.StatusCode != 200 {
				failed.Add(1)
				open.Done()
				if err == nil {
					res.Body.Close()
				}
				return
			}
			if *h2 && res.ProtoMajor != 2 {
				log.Fatalf("want HTTP/2, got %s", res.Proto)
			}
			open.Done()
			buf := make([]byte, 4<<10)
			sub := &counter{}
			for {
				k, err := res.Body.Read(buf)
				if k > 0 {
					sub.feed(buf[:k])
					if d := sub.n.Swap(0); d > 0 {
						mu.Lock()
						c.n.Add(d)
						mu.Unlock()
						select {
						case c.wake <- struct{}{}:
						default:
						}
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	open.Wait()
	connect := time.Since(start)
	time.Sleep(*settle)
	after := heapStats(*stats)
	rss1 := procStatus(*pid, "VmRSS")
	ok := int64(*n) - failed.Load()
	fig := idleResult{
		Label: *label, Proto: proto(*hubURL, *h2), N: *n, Pattern: *pattern, Streams: ok, Share: *share, Failed: failed.Load(), ConnectS: connect.Seconds(),
		RSSPerStream: float64(rss1-rss0) * 1024 / float64(ok),
		Date:         time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(),
	}
	if after != nil {
		fig.HeapPerStream = (float64(after["heap_alloc"]) - float64(base["heap_alloc"])) / float64(ok)
		fig.StackPerStream = (float64(after["stack_inuse"]) - float64(base["stack_inuse"])) / float64(ok)
		fig.GoroutinesPerStream = (float64(after["goroutines"]) - float64(base["goroutines"])) / float64(ok)
		fig.Goroutines = after["goroutines"]
	}
	fmt.Printf("streams=%d (%d per client) failed=%d connect=%.1fs rss=%d→%d KB rss/stream=%.0f B heap/stream=%.0f B stack/stream=%.0f B goroutines/stream=%.2f\n",
		ok, *share, failed.Load(), connect.Seconds(), rss0, rss1, fig.RSSPerStream, fig.HeapPerStream, fig.StackPerStream, fig.GoroutinesPerStream)
	defer func() {
		if *jsonOut != "" {
			writeJSONLine(*jsonOut, fig)
		}
	}()
	if *heapProfile != "" {
		res, err := http.Get("http://" + *stats + "/debug/pprof/heap?gc=1")
		if err != nil {
			log.Fatal(err)
		}
		f, err := os.Create(*heapProfile)
		if err != nil {
			log.Fatal(err)
		}
		_, _ = io.Copy(f, res.Body)
		res.Body.Close()
		f.Close()
	}
	if *pubs == 0 {
		return
	}
	pc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	cpu0 := cpuTime(*pid)
	t0 := time.Now()
	for k := range *pubs {
		form := url.Values{"topic": {topic}, "data": {strconv.Itoa(k)}}
		res, err := pc.PostForm(*hubURL, form)
		if err != nil {
			log.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			log.Fatalf("publish: %s", res.Status)
		}
	}
	want := ok * int64(*pubs)
	for c.n.Load() < want {
		select {
		case <-c.wake:
		case <-time.After(10 * time.Second):
			log.Printf("gave up: %d of %d deliveries", c.n.Load(), want)
			want = c.n.Load()
		}
	}
	elapsed := time.Since(t0)
	cpu := cpuTime(*pid) - cpu0
	fig.CPUPerDelivery = float64(cpu.Microseconds()) / float64(want)
	fmt.Printf("deliveries=%d in %.2fs (%.0f/s) hub CPU %.2fs = %.2f µs/delivery\n",
		want, elapsed.Seconds(), float64(want)/elapsed.Seconds(), cpu.Seconds(), fig.CPUPerDelivery)
}

// rawSubscriber returns a func that opens a stream of topic on the hub
// at u (plain HTTP) over a connection of its own, with a receive buffer
// of rcvbuf bytes unless 0, and returns it once its headers are read.
func rawSubscriber(u *url.URL, topic string) func(rcvbuf int) (net.Conn, *bufio.Reader) {
	get := fmt.Sprintf("GET %s?match=%s HTTP/1.1\r\nHost: %s\r\n\r\n", u.Path, url.QueryEscape(topic), u.Host)
	return func(rcvbuf int) (net.Conn, *bufio.Reader) {
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			if rcvbuf == 0 {
				return nil
			}
			return c.Control(func(fd uintptr) {
				_ = setRcvBuf(fd, rcvbuf)
			})
		}}
		conn, err := d.Dial("tcp", u.Host)
		if err != nil {
			log.Fatal(err)
		}
		_, _ = io.WriteString(conn, get)
		br := bufio.NewReaderSize(conn, 512)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != 200 {
			log.Fatalf("subscribe: %v %v", err, res)
		}
		return conn, br
	}
}

// idleResult is what idle measured, as -json writes it.
type idleResult struct {
	Label string `json:"label,omitempty"`
	// Proto is h1 (plain HTTP/1.1), h1-tls or h2.
	Proto string `json:"proto"`
	// N is the streams asked for, Pattern whether each matched a URL
	// pattern of its own; Streams is how many opened, Share how many
	// share each client.
	N        int     `json:"n"`
	Pattern  bool    `json:"pattern,omitempty"`
	Streams  int64   `json:"streams"`
	Share    int     `json:"share"`
	Failed   int64   `json:"failed"`
	ConnectS float64 `json:"connect_s"`
	// The hub's resident memory per stream, and (with -stats) its live
	// heap, goroutine stacks and goroutines per stream.
	RSSPerStream        float64 `json:"rss_per_stream_b"`
	HeapPerStream       float64 `json:"heap_per_stream_b,omitempty"`
	StackPerStream      float64 `json:"stack_per_stream_b,omitempty"`
	GoroutinesPerStream float64 `json:"goroutines_per_stream,omitempty"`
	Goroutines          uint64  `json:"goroutines,omitempty"` // the hub's, all told
	// CPUPerDelivery is the hub's CPU time per delivery (with -pubs).
	CPUPerDelivery float64 `json:"cpu_per_delivery_us,omitempty"`
	Date           string  `json:"date"`
	GoVersion      string  `json:"go_version"`
}

func proto(hubURL string, h2 bool) string {
	switch {
	case h2:
		return "h2"
	case strings.HasPrefix(hubURL, "https:"):
		return "h1-tls"
	}
	return "h1"
}

// writeJSONLine appends v to path as one line of JSON.
func writeJSONLine(path string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		log.Fatal(err)
	}
}

func stall(args []string) {
	fs := flag.NewFlagSet("stall", flag.ExitOnError)
	hubURL := fs.String("url", "http://127.0.0.1:8443/.well-known/mercure", "hub URL (plain HTTP)")
	n := fs.Int("n", 1000, "streams that never read")
	updates := fs.Int("updates", 5, "updates published, one at a time")
	size := fs.Int("size", 1_000_000, "bytes of each update's data (the POST body must fit the hub's body limit, 1 MiB by default)")
	pid := fs.Int("pid", 0, "the hub's process id")
	stats := fs.String("stats", "127.0.0.1:6060", "the hub's -stats address")
	_ = fs.Parse(args)
	u, err := url.Parse(*hubURL)
	if err != nil {
		log.Fatal(err)
	}
	const topic = "https://bench.example/fanout"
	open := rawSubscriber(u, topic)
	// The buffer is set before connecting: see detached_stall_test.go.
	stalled := make([]net.Conn, *n)
	for i := range stalled {
		stalled[i], _ = open(4 << 10)
	}
	healthy, br := open(0)
	events := make(chan time.Time, *updates+1)
	go func() {
		buf := make([]byte, 64<<10)
		var tail []byte
		inData := false
		for {
			k, err := br.Read(buf)
			if k > 0 {
				b := append(tail, buf[:k]...)
				for {
					if !inData {
						i := bytes.Index(b, []byte("\ndata:"))
						if i < 0 {
							break
						}
						inData, b = true, b[i+6:]
						continue
					}
					i := bytes.Index(b, []byte("\n\n"))
					if i < 0 {
						break
					}
					events <- time.Now()
					inData, b = false, b[i+2:]
				}
				tail = append([]byte(nil), b[max(0, len(b)-6):]...)
			}
			if err != nil {
				close(events)
				return
			}
		}
	}()
	time.Sleep(time.Second)
	heap0 := heapStats(*stats)
	peak := func() int64 {
		res, err := http.Get("http://" + *stats + "/peak")
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		var v int64
		_, _ = fmt.Fscan(res.Body, &v)
		return v
	}
	peak()
	data := strings.Repeat("x", *size)
	var delays []time.Duration
	for k := range *updates {
		t0 := time.Now()
		res, err := http.PostForm(*hubURL, url.Values{"topic": {topic}, "data": {strconv.Itoa(k) + data}})
		if err != nil {
			log.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			log.Fatalf("publish: %s (the hub takes bodies of up to -max-body-bytes, 1 MiB by default)", res.Status)
		}
		select {
		case at, ok := <-events:
			if !ok {
				log.Fatal("the healthy stream ended")
			}
			delays = append(delays, at.Sub(t0))
		case <-time.After(60 * time.Second):
			log.Fatal("the healthy stream got nothing for 60 s")
		}
	}
	rssAfter := procStatus(*pid, "VmRSS")
	hwm := procStatus(*pid, "VmHWM")
	peakLive := peak()
	heap1 := heapStats(*stats)
	slices.Sort(delays)
	fmt.Printf("stalled=%d updates=%d×%d B healthy delay p50=%v max=%v hub RSS after=%d KB peak=%d KB live heap before/peak/after=%d/%d/%d KB\n",
		*n, *updates, *size, delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond),
		rssAfter, hwm, heap0["heap_alloc"]>>10, peakLive>>10, heap1["heap_alloc"]>>10)
	healthy.Close()
	for _, c := range stalled {
		c.Close()
	}
}

// hubMetrics is what serve's /hub says of the hub's counters.
type hubMetrics struct {
	Streams   int               `json:"streams"`
	Opened    uint64            `json:"opened"`
	Closed    map[string]uint64 `json:"closed"`
	Overflows uint64            `json:"overflows"`
}

func readHubMetrics(addr string) hubMetrics {
	res, err := http.Get("http://" + addr + "/hub")
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	var m hubMetrics
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		log.Fatal(err)
	}
	return m
}

func burst(args []string) {
	fs := flag.NewFlagSet("burst", flag.ExitOnError)
	hubURL := fs.String("url", "http://127.0.0.1:8443/.well-known/mercure", "hub URL (plain HTTP)")
	n := fs.Int("n", 400, "streams that never read (4 KiB receive buffers)")
	healthyN := fs.Int("healthy", 3, "streams that read all they get")
	updates := fs.Int("updates", 120, "updates published")
	size := fs.Int("size", 256<<10, "bytes of each update's data (the POST body must fit the hub's -max-body-bytes)")
	publishers := fs.Int("publishers", 4, "publishers posting side by side, each as soon as its last POST is answered")
	quiet := fs.Duration("quiet", 10*time.Second, "give up on the healthy streams after this long without progress")
	then := fs.Duration("then", 0, "after the burst, wait this long, publish one more update and report the overflows again (past the stall grace, 3.75 s by default, the stalled streams overflow)")
	stats := fs.String("stats", "127.0.0.1:6060", "the hub's -stats address")
	_ = fs.Parse(args)
	u, err := url.Parse(*hubURL)
	if err != nil {
		log.Fatal(err)
	}
	const topic = "https://bench.example/fanout"
	open := rawSubscriber(u, topic)
	before := readHubMetrics(*stats)
	stalled := make([]net.Conn, *n)
	for i := range stalled {
		stalled[i], _ = open(4 << 10) // set before connecting: see detached_stall_test.go
	}
	counts := make([]*counter, *healthyN)
	var readers sync.WaitGroup
	for i := range counts {
		conn, br := open(0)
		c := &counter{wake: make(chan struct{}, 1)}
		counts[i] = c
		readers.Go(func() {
			defer conn.Close()
			buf := make([]byte, 64<<10)
			for c.n.Load() < int64(*updates) {
				k, err := br.Read(buf)
				c.feed(buf[:k])
				if err != nil {
					return
				}
			}
		})
	}
	time.Sleep(time.Second)
	data := strings.Repeat("x", *size)
	var next atomic.Int64
	var refused sync.Map
	var pubs sync.WaitGroup
	t0 := time.Now()
	for range *publishers {
		pubs.Go(func() {
			for k := next.Add(1) - 1; k < int64(*updates); k = next.Add(1) - 1 {
				res, err := http.PostForm(*hubURL, url.Values{"topic": {topic}, "data": {data}})
				if err != nil {
					log.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					v, _ := refused.LoadOrStore(res.StatusCode, new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				}
			}
		})
	}
	pubs.Wait()
	took := time.Since(t0)
	// The healthy streams get the rest, or stop making progress.
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	last := int64(-1)
wait:
	for {
		select {
		case <-done:
			break wait
		case <-time.After(*quiet):
		}
		var sum int64
		for _, c := range counts {
			sum += c.n.Load()
		}
		if sum == last {
			break
		}
		last = sum
	}
	after := readHubMetrics(*stats)
	got := make([]int64, len(counts))
	for i, c := range counts {
		got[i] = c.n.Load()
	}
	var refusals []string
	refused.Range(func(k, v any) bool {
		refusals = append(refusals, fmt.Sprintf("%d×%d", v.(*atomic.Int64).Load(), k))
		return true
	})
	fmt.Printf("stalled=%d healthy=%d updates=%d×%d B publishers=%d: published in %.2fs (refused: %v); healthy got %v of %d; overflows +%d, closed for queue_overflow +%d, write_error +%d; streams open %d\n",
		*n, *healthyN, *updates, *size, *publishers, took.Seconds(), refusals, got, *updates,
		after.Overflows-before.Overflows, after.Closed["queue_overflow"]-before.Closed["queue_overflow"],
		after.Closed["write_error"]-before.Closed["write_error"], after.Streams)
	if *then > 0 {
		time.Sleep(*then)
		res, err := http.PostForm(*hubURL, url.Values{"topic": {topic}, "data": {"then"}})
		if err != nil {
			log.Fatal(err)
		}
		res.Body.Close()
		time.Sleep(time.Second)
		m := readHubMetrics(*stats)
		fmt.Printf("one more update %v after the burst: overflows +%d, closed for queue_overflow +%d, write_error +%d; streams open %d\n",
			*then, m.Overflows-before.Overflows, m.Closed["queue_overflow"]-before.Closed["queue_overflow"],
			m.Closed["write_error"]-before.Closed["write_error"], m.Streams)
	}
	for _, c := range stalled {
		c.Close()
	}
}
