//go:build unix

package natsstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

// The CPU a hub spends on updates that another hub publishes, for its
// streams or not, with its feed reading only its streams' topics and
// with it reading everything (docs/clusters.md, "Read only what you
// serve"). The hub measured, A, is alone in this process with its store;
// another process, this test binary run as TestFeedCPUPeer, holds hub B,
// which publishes, and the subscribers of A's streams, which read them
// over loopback. A's CPU is this process's (user and system) from B's
// first update to A's last delivery, or to B's last acknowledgment when
// A reads none: it includes A's idle work over that window (the feed's
// checks and heartbeats), shared out over the updates.
//
//	MERCURE_TEST_NATS=/root/go/bin/nats-server go test -run '^$' \
//	    -bench FeedCPU -benchtime 20000x ./natsstore
func BenchmarkFeedCPU(b *testing.B) {
	const streams = 1000
	for _, filtered := range []bool{true, false} {
		for _, served := range []bool{false, true} {
			b.Run(fmt.Sprintf("filtered=%v/served=%v", filtered, served), func(b *testing.B) {
				feedCPU(b, streams, b.N, filtered, served)
			})
		}
	}
}

func feedCPU(b *testing.B, streams, updates int, filtered, served bool) {
	addr, name := server(b).URL, streamName()
	nc, err := nats.Connect(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	s, err := natsstore.New(nc, name, natsstore.WithMaxLen(0))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var st store.Store = s
	if !filtered {
		st = fullFeed{s} // no InterestStore: the hub reads everything
	}
	h, err := mercure.New(interestHubURL, mercure.WithStore(st), mercure.WithAnonymousSubscribers(),
		mercure.WithInsecurePublishing(), mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		srv.CloseClientConnections()
		srv.Close()
	}()

	peer := exec.Command(os.Args[0], "-test.run=^TestFeedCPUPeer$")
	peer.Env = append(os.Environ(), "MERCURE_FEEDCPU_PEER="+strings.Join([]string{addr, name, srv.URL, strconv.Itoa(streams), strconv.Itoa(updates), strconv.FormatBool(served)}, " "))
	peer.Stderr = os.Stderr
	in, err := peer.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := peer.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := peer.Start(); err != nil {
		b.Fatal(err)
	}
	defer peer.Wait()
	defer in.Close()
	lines := bufio.NewScanner(out)
	expect := func(what string) {
		for lines.Scan() {
			if lines.Text() == what {
				return
			}
		}
		b.Fatalf("the peer ended before %q", what)
	}
	expect("ready")
	storetest.WaitFor(b, "A's streams open", func() bool { return h.Metrics().Streams == streams })
	if filtered {
		// Its topics, its own, multi-topic updates.
		storetest.WaitFor(b, "A's feed narrowed", func() bool { return len(s.FeedFilter()) == streams+2 })
	}
	deliveries, read := h.Metrics().Deliveries, s.FeedRead()
	b.ResetTimer()
	before := cpu()
	start := time.Now()
	fmt.Fprintln(in, "go")
	expect("done")
	if served {
		storetest.WaitFor(b, "A's deliveries", func() bool { return h.Metrics().Deliveries-deliveries >= uint64(updates) })
	} else if !filtered {
		storetest.WaitFor(b, "A's feed", func() bool { return s.FeedRead()-read >= uint64(updates) })
	}
	used, took := cpu()-before, time.Since(start)
	b.StopTimer()
	fmt.Fprintln(in, "stop") // the peer's subscribers may go
	b.ReportMetric(float64(used.Nanoseconds())/float64(updates), "cpu-ns/update")
	b.ReportMetric(float64(s.FeedRead()-read)/float64(updates), "read/update")
	b.ReportMetric(float64(updates)/took.Seconds(), "updates/s")
}

// cpu is this process's user and system time.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fullFeed hides a store's ListenInterest: the hub then reads everything.
type fullFeed struct{ store.LatestStore }

// TestFeedCPUPeer is the other process of BenchmarkFeedCPU: hub B and
// the subscribers of hub A. It skips unless the benchmark runs it.
func TestFeedCPUPeer(t *testing.T) {
	args := strings.Fields(os.Getenv("MERCURE_FEEDCPU_PEER"))
	if len(args) != 6 {
		t.Skip("run by BenchmarkFeedCPU")
	}
	addr, name, hubA := args[0], args[1], args[2]
	streams, _ := strconv.Atoi(args[3])
	updates, _ := strconv.Atoi(args[4])
	served := args[5] == "true"
	nc, err := nats.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s, err := natsstore.New(nc, name, natsstore.WithMaxLen(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := mercure.New(interestHubURL, mercure.WithStore(s), mercure.WithInsecurePublishing(), mercure.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: streams}}
	for i := range streams {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hubA+"/.well-known/mercure?match="+url.QueryEscape(topicOf(fmt.Sprint("a", i))), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer res.Body.Close()
			io.Copy(io.Discard, res.Body)
		}()
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return
	}
	for i := range updates {
		tp := topicOf(fmt.Sprint("b", i%streams))
		if served {
			tp = topicOf(fmt.Sprint("a", i%streams))
		}
		if _, err := h.Publish(ctx, mercure.Update{Topics: []string{tp}, Data: "update " + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("done")
	in.Scan() // "stop": A's streams stay open until A has delivered
}

// The time the server takes to create the feed's consumer with n
// subjects (natsstore's limit on them, maxFilters, comes from it): the
// feed passes nothing on meanwhile, and the stream's leader spends it.
//
//	MERCURE_TEST_NATS=/root/go/bin/nats-server go test -run '^$' \
//	    -bench ConsumerSubjects ./natsstore
func BenchmarkConsumerSubjects(b *testing.B) {
	for _, n := range []int{10, 100, 300, 1000} {
		b.Run(fmt.Sprintf("subjects=%d", n), func(b *testing.B) {
			addr, name := server(b).URL, streamName()
			nc, err := nats.Connect(addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			s, err := natsstore.New(nc, name)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				b.Fatal(err)
			}
			filter := []string{name + ".*.m"}
			for i := range n - 1 {
				filter = append(filter, fmt.Sprintf("%s.*.%024x", name, i))
			}
			ctx := context.Background()
			for b.Loop() {
				c, err := js.CreateConsumer(ctx, name, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
					MemoryStorage: true, Replicas: 1, FilterSubjects: filter})
				if err != nil {
					b.Fatal(err)
				}
				if err := js.DeleteConsumer(ctx, name, c.CachedInfo().Name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
