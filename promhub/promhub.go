// Package promhub exposes the metrics of a [mercure.Hub] to Prometheus.
//
// The hub counts with plain atomic counters whether or not anything reads
// them (see [mercure.Hub.Metrics]); the [prometheus.Collector] that
// [NewCollector] returns reads them at scrape time, so that metrics cost
// nothing on the hub's hot path beyond those counters, and the mercure
// package itself does not depend on client_golang.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(promhub.NewCollector(hub))
//	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// or, in short, mux.Handle("/metrics", promhub.Handler(hub)). The series
// are listed in docs/operations.md.
package promhub

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mercurekit/mercure"
)

// Collector is a [prometheus.Collector] of a hub's metrics.
type Collector struct {
	hub *mercure.Hub
}

// NewCollector returns a collector of hub's metrics, to register with a
// [prometheus.Registerer]. Register one per hub: two hubs in a registry
// need their own const labels (see [prometheus.WrapRegistererWith]).
func NewCollector(hub *mercure.Hub) *Collector { return &Collector{hub: hub} }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	streamsDesc          = desc("mercure_streams", "Subscriber connections open now.")
	streamsOpenedDesc    = desc("mercure_streams_opened_total", "Subscriber connections opened.")
	streamsClosedDesc    = desc("mercure_streams_closed_total", "Subscriber connections closed, by reason.", "reason")
	publishedDesc        = desc("mercure_updates_published_total", "Updates recorded, by source (http, go or tx).", "source")
	refusedDesc          = desc("mercure_updates_refused_total", "Publications refused, by HTTP status.", "reason")
	deliveriesDesc       = desc("mercure_deliveries_total", "Updates queued for a stream by live dispatch.")
	deliveredBytesDesc   = desc("mercure_delivered_bytes_total", "Bytes of the updates queued for streams by live dispatch.")
	publishDurationDesc  = desc("mercure_publish_duration_seconds", "From an update's acceptance to its recording by the store.")
	dispatchDurationDesc = desc("mercure_dispatch_duration_seconds", "Fan-out of one update to the streams' queues.")
	deliveryDelayDesc    = desc("mercure_delivery_delay_seconds", "From an update's recording to its write to a stream, sampled (each stream's first write, then one in 64).")
	replaysDesc          = desc("mercure_replays_total", "Streams that asked for history (Last-Event-ID).")
	replayedDesc         = desc("mercure_replayed_events_total", "Events written by replays.")
	tokenFailuresDesc    = desc("mercure_token_failures_total", "Access tokens refused, by reason.", "reason")
	storeErrorsDesc      = desc("mercure_store_errors_total", "Failed calls to the store (recording an update, reading history).")
	deferredDesc         = desc("mercure_subscribes_deferred_total", "Subscribe requests refused for now (429, 503) answered to an EventSource as a stream that tells it when to reconnect.")
	feedUpDesc           = desc("mercure_store_feed_up", "1 while the store's live feed works, 0 while it fails.")
	subscriptionsDesc    = desc("mercure_subscriptions", "Active subscriptions of this hub (with WithSubscriptions).")
	dispatchedDesc       = desc("mercure_updates_dispatched_total", "Updates dispatched to this hub's subscribers, from any hub sharing the store.")
	queuedBytesDesc      = desc("mercure_queued_bytes", "Bytes waiting in the streams' queues.")
)

var allDescs = []*prometheus.Desc{
	streamsDesc, streamsOpenedDesc, streamsClosedDesc, publishedDesc, refusedDesc,
	deliveriesDesc, deliveredBytesDesc, publishDurationDesc, dispatchDurationDesc,
	deliveryDelayDesc, replaysDesc, replayedDesc, tokenFailuresDesc, storeErrorsDesc, deferredDesc,
	feedUpDesc, subscriptionsDesc, dispatchedDesc, queuedBytesDesc,
}

// Describe implements [prometheus.Collector].
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements [prometheus.Collector]: it reads one snapshot of the
// hub's metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.hub.Metrics()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	histogram := func(d *prometheus.Desc, h mercure.Histogram) {
		buckets := make(map[float64]uint64, len(h.Bounds))
		for i, b := range h.Bounds {
			buckets[b] = h.Buckets[i]
		}
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
	}
	gauge(streamsDesc, float64(m.Streams))
	counter(streamsOpenedDesc, m.StreamsOpened)
	byLabel(ch, streamsClosedDesc, m.StreamsClosed)
	byLabel(ch, publishedDesc, m.UpdatesPublished)
	byLabel(ch, refusedDesc, m.UpdatesRefused)
	counter(deliveriesDesc, m.Deliveries)
	counter(deliveredBytesDesc, m.DeliveredBytes)
	histogram(publishDurationDesc, m.PublishDuration)
	histogram(dispatchDurationDesc, m.DispatchDuration)
	histogram(deliveryDelayDesc, m.DeliveryDelay)
	counter(replaysDesc, m.Replays)
	counter(replayedDesc, m.ReplayedEvents)
	byLabel(ch, tokenFailuresDesc, m.TokenFailures)
	counter(storeErrorsDesc, m.StoreErrors)
	counter(deferredDesc, m.SubscribesDeferred)
	up := 1.0
	if m.FeedError != nil {
		up = 0
	}
	gauge(feedUpDesc, up)
	gauge(subscriptionsDesc, float64(m.Subscriptions))
	counter(dispatchedDesc, m.Dispatched)
	gauge(queuedBytesDesc, float64(m.QueuedBytes))
}

// byLabel sends a counter of d per label value of values.
func byLabel[L ~string](ch chan<- prometheus.Metric, d *prometheus.Desc, values map[L]uint64) {
	for l, v := range values {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), string(l))
	}
}

// Handler returns an [http.Handler] serving hub's metrics, and only
// those, in the Prometheus exposition format, from a registry of its
// own. Serve it on an address the hub's clients cannot reach. To add the
// Go runtime's metrics or others, register [NewCollector] with a registry
// of your own instead.
func Handler(hub *mercure.Hub) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(hub))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
