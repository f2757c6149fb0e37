package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// get returns the status and body of GET u.
func get(t *testing.T, u string) (int, string) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// -metrics-addr serves /metrics, /healthz and /readyz on a listener of
// its own, and none of them on the public address.
func TestStandalone_MetricsAddr(t *testing.T) {
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-metrics-addr", "127.0.0.1:0", "-log-level", "warn"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if logLevel.Level() != slog.LevelWarn {
		t.Errorf("log level %v, want warn", logLevel.Level())
	}
	if s.metricsLn, err = net.Listen("tcp", s.metricsAddr); err != nil {
		t.Fatal(err)
	}
	ops := "http://" + s.metricsLn.Addr().String()
	addr, stop := serveInBackground(t, s)
	public := "http://" + addr

	res, err := http.Post(public+"/.well-known/mercure", "application/x-www-form-urlencoded", strings.NewReader("topic=urn%3Ax&data=hi"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("publish: %d", res.StatusCode)
	}
	code, body := get(t, ops+"/metrics")
	if code != 200 || !strings.Contains(body, `mercure_updates_published_total{source="http"} 1`) {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if code, body := get(t, ops+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, ops+"/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _ := get(t, public+path); code != http.StatusNotFound {
			t.Errorf("public %s: %d, want 404", path, code)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s.hub.Ready() == nil {
		t.Error("ready after shutdown")
	}
}

func TestStandalone_BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-log-level", "loud"},
		{"-addr", "127.0.0.1:3999", "-metrics-addr", "127.0.0.1:3999"},
	} {
		if _, err := configure(args, slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	logLevel.Set(slog.LevelInfo)
}

// -traces writes the hub's spans to a file, flushed at shutdown.
func TestStandalone_Traces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spans.json")
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-insecure-publish", "-traces", path}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := serveInBackground(t, s)
	res, err := http.Post("http://"+addr+"/.well-known/mercure", "application/x-www-form-urlencoded", strings.NewReader("topic=urn%3Ax&data=hi"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{`"Name":"mercure.publish"`, `"Name":"mercure.store.append"`} {
		if !strings.Contains(string(b), name) {
			t.Fatalf("no %s span in the traces file:\n%s", name, b)
		}
	}
}
