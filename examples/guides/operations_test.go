package guides_test

// The Prometheus snippet of docs/operations.md, verbatim.

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/promhub"
)

func Example_prometheus() {
	hub, err := mercure.New("https://example.com/.well-known/mercure", mercure.WithLogger(nil))
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	ops := http.NewServeMux()

	reg := prometheus.NewRegistry()
	reg.MustRegister(promhub.NewCollector(hub))
	ops.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// or: ops.Handle("GET /metrics", promhub.Handler(hub))

	rec := httptest.NewRecorder()
	ops.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "mercure_streams ") {
			fmt.Print(line)
		}
	}
	// Output: mercure_streams 0
}
