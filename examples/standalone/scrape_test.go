package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/storetest"
)

// A real Prometheus scrapes the standalone's -metrics-addr, and its HTTP
// API reads the series back: the exposition is what Prometheus accepts,
// not only what a text parser does. It needs the prometheus binary
// (Debian's package); .ci/run installs it and sets
// MERCURE_TEST_PROMETHEUS=1, which makes its absence a failure.
func TestPrometheusScrapesTheStandalone(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: runs Prometheus for seconds")
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("MERCURE_TEST_PROMETHEUS") != "" {
			t.Fatal("MERCURE_TEST_PROMETHEUS is set but prometheus is not installed")
		}
		storetest.Skip(t, wantPrometheus)
	}
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-metrics-addr", "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if s.metricsLn, err = net.Listen("tcp", s.metricsAddr); err != nil {
		t.Fatal(err)
	}
	target := s.metricsLn.Addr().String()
	addr, stop := serveInBackground(t, s)
	defer stop()
	const published = 3
	for i := range published {
		res, err := http.Post("http://"+addr+"/.well-known/mercure", "application/x-www-form-urlencoded", strings.NewReader(fmt.Sprintf("topic=urn%%3Ax&data=%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("publish: %d", res.StatusCode)
		}
	}

	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: mercure
    static_configs:
      - targets: [%q]
`, target), 0o600); err != nil {
		t.Fatal(err)
	}
	promAddr := storetest.Addr(t) // free for Prometheus: no outgoing connection takes it meanwhile
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", log.String())
		}
	}()

	// query returns the value of the single sample of q, or "" when
	// there is none yet.
	query := func(q string) string {
		res, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return "" // not listening yet
		}
		defer res.Body.Close()
		var body struct {
			Status string
			Data   struct {
				Result []struct {
					Value [2]any
				}
			}
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Status != "success" || len(body.Data.Result) != 1 {
			return ""
		}
		v, _ := body.Data.Result[0].Value[1].(string)
		return v
	}
	want := map[string]string{
		`up{job="mercure"}`: "1",
		`mercure_updates_published_total{job="mercure",source="http"}`:     fmt.Sprint(published),
		`mercure_store_feed_up{job="mercure"}`:                             "1",
		`mercure_publish_duration_seconds_bucket{job="mercure",le="+Inf"}`: fmt.Sprint(published),
		`mercure_streams_closed_total{job="mercure",reason="shutdown"}`:    "0",
	}
	deadline := time.Now().Add(60 * time.Second)
	for q, v := range want {
		var got string
		if !storetest.Within(time.Until(deadline), func() bool { got = query(q); return got == v }) {
			t.Fatalf("Prometheus: %s = %q, want %q", q, got, v)
		}
	}
}
