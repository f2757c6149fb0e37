package mercure

import (
	"math"
	"sync/atomic"
	"time"
)

// The hub counts what it does with plain atomic counters, updated whether
// or not anything reads them: a few atomic adds per update and per
// stream, none per delivery (the dispatcher adds its deliveries once per
// dispatch). [Hub.Metrics] copies them; the promhub package exposes them
// to Prometheus at scrape time, so that this package never depends on a
// metrics library.

// Reasons a stream ended, the label values of
// mercure_streams_closed_total{reason}: see [Metrics.StreamsClosed].
const (
	CloseClientGone    = "client_gone"    // the client left
	CloseTokenExpired  = "token_expired"  // the subscriber's token expired
	CloseLifetime      = "lifetime"       // the maximum lifetime ended (WithMaxLifetime)
	CloseQueueOverflow = "queue_overflow" // the client fell behind (see [Limits.QueueEvents])
	CloseWriteError    = "write_error"    // a write failed or timed out
	CloseHistoryGap    = "history_gap"    // the store's feed or a replay skipped events
	CloseReplayError   = "replay_error"   // history could not be read, or no replay slot was free
	CloseShutdown      = "shutdown"       // the hub shut down
	CloseRevoked       = "revoked"        // WithAuthorizer: the session behind the stream ended
	CloseGrantsChanged = "grants_changed" // WithAuthorizer: the session's subscribe grants or payload changed
)

// endReason is why a stream ended, an index into closeReasons; 0 is unset.
type endReason uint8

const (
	endUnset endReason = iota
	endClientGone
	endTokenExpired
	endLifetime
	endQueueOverflow
	endWriteError
	endHistoryGap
	endReplayError
	endShutdown
	endRevoked
	endGrantsChanged
	numEndReasons
)

var closeReasons = [numEndReasons]string{"", CloseClientGone, CloseTokenExpired, CloseLifetime, CloseQueueOverflow, CloseWriteError, CloseHistoryGap, CloseReplayError, CloseShutdown, CloseRevoked, CloseGrantsChanged}

// Reasons an access token was refused, the label values of
// mercure_token_failures_total{reason}: see [Metrics.TokenFailures].
const (
	TokenMissing        = "missing"         // none presented where one is required
	TokenMalformed      = "malformed"       // not a well-formed Bearer token or JWS, or too large
	TokenSignature      = "signature"       // the signature or its key does not verify
	TokenExpired        = "expired"         // exp passed, or nbf or iat are in the future
	TokenAudienceIssuer = "audience_issuer" // wrong aud or iss
	TokenGrants         = "grants"          // invalid mercure claims, or no grant for the topics published
	TokenOther          = "other"           // any other failed check (a required claim missing...)
)

var tokenReasons = [...]string{TokenMissing, TokenMalformed, TokenSignature, TokenExpired, TokenAudienceIssuer, TokenGrants, TokenOther}

// refusalStatuses are the statuses publications are refused with, the
// label values of mercure_updates_refused_total{reason}; any other is
// counted as "other".
var refusalStatuses = [...]string{"400", "401", "403", "408", "413", "415", "503", "other"}

func refusalIndex(status int) int {
	switch status {
	case 400:
		return 0
	case 401:
		return 1
	case 403:
		return 2
	case 408:
		return 3
	case 413:
		return 4
	case 415:
		return 5
	case 503:
		return 6
	}
	return 7
}

// counters are the hub's metrics.
type counters struct {
	streamsOpened  atomic.Uint64
	streamsClosed  [numEndReasons]atomic.Uint64
	publishedHTTP  atomic.Uint64
	publishedGo    atomic.Uint64
	publishedTx    atomic.Uint64
	refused        [len(refusalStatuses)]atomic.Uint64
	deliveries     atomic.Uint64
	deliveredBytes atomic.Uint64
	replays        atomic.Uint64
	replayed       atomic.Uint64
	tokenFailures  [len(tokenReasons)]atomic.Uint64
	storeErrors    atomic.Uint64

	publishDuration  histogram
	dispatchDuration histogram
	deliveryDelay    histogram
}

func (c *counters) tokenFailure(reason string) {
	for i, r := range tokenReasons {
		if r == reason {
			c.tokenFailures[i].Add(1)
			return
		}
	}
	c.tokenFailures[len(tokenReasons)-1].Add(1)
}

// delaySampleEvery is how many events a stream writes per sample of
// mercure_delivery_delay_seconds: its first, then one in this many.
const delaySampleEvery = 64

// histogramBounds are the upper bounds of the duration histograms'
// buckets, in seconds: from 100µs to 10s.
var histogramBounds = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

var histogramBoundsNS = func() (b [len(histogramBounds)]int64) {
	for i, s := range histogramBounds {
		b[i] = int64(math.Round(s * 1e9))
	}
	return b
}()

// histogram is a fixed-bucket histogram of durations made of atomic
// counters: observing costs a short scan and two or three atomic adds.
type histogram struct {
	buckets [len(histogramBounds) + 1]atomic.Uint64 // the last is +Inf
	count   atomic.Uint64
	sumNS   atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	ns := int64(max(d, 0))
	i := 0
	for i < len(histogramBoundsNS) && ns > histogramBoundsNS[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNS.Add(ns)
	h.count.Add(1) // last: a snapshot's count never exceeds its buckets' sum
}

func (h *histogram) snapshot() Histogram {
	s := Histogram{Bounds: histogramBounds[:], Buckets: make([]uint64, len(histogramBounds))}
	var cum uint64
	for i := range histogramBounds {
		cum += h.buckets[i].Load()
		s.Buckets[i] = cum
	}
	s.Count = h.count.Load()
	// Read apart from the buckets: under load the count may run a little
	// ahead of them; the snapshot stays consistent.
	s.Count = max(s.Count, cum)
	s.Sum = float64(h.sumNS.Load()) / 1e9
	return s
}

// Histogram is a snapshot of a duration histogram, in Prometheus's
// terms: Buckets[i] counts the observations of at most Bounds[i] seconds
// (cumulative); Count counts them all, and Sum is their total in seconds.
type Histogram struct {
	Bounds  []float64 // upper bounds in seconds, increasing; shared, do not modify
	Buckets []uint64
	Count   uint64
	Sum     float64
}

// Metrics is a snapshot of a hub's counters, for monitoring: the promhub
// package exposes it to Prometheus. Counters count from [New]; maps are
// keyed by the label values documented with each field, and hold every
// one of them, zeros included.
type Metrics struct {
	Stats // Streams, Dispatched, Overflows, QueuedBytes, FeedError

	// StreamsOpened counts the subscriber connections opened, and
	// StreamsClosed those closed, by reason: [CloseClientGone],
	// [CloseTokenExpired], [CloseLifetime], [CloseQueueOverflow],
	// [CloseWriteError], [CloseHistoryGap], [CloseReplayError],
	// [CloseShutdown], [CloseRevoked], [CloseGrantsChanged].
	StreamsOpened uint64
	StreamsClosed map[string]uint64
	// UpdatesPublished counts the updates recorded, by source: "http"
	// (POST), "go" ([Hub.Publish]) or "tx" (recorded by the store in the
	// application's transaction, such as pgstore's PublishTx: see
	// [OutboxStore]; counted when the store records it in the
	// transaction, whether or not that commits).
	UpdatesPublished map[string]uint64
	// UpdatesRefused counts the publications refused, by HTTP status:
	// "400", "401", "403", "408", "413", "415", "503" or "other". A
	// refused [Hub.Publish] counts under the status its error would get
	// over HTTP; one whose context ended does not count.
	UpdatesRefused map[string]uint64
	// Deliveries counts the updates queued for a stream by live dispatch
	// (one per stream an update reaches), and DeliveredBytes their size.
	Deliveries     uint64
	DeliveredBytes uint64
	// PublishDuration is from an update's acceptance to its recording by
	// the store; DispatchDuration the fan-out of one update to the
	// streams' queues; DeliveryDelay from an update's recording
	// ([Event.Time]) to its write to a stream, sampled: the first event
	// written to each stream, then one in 64.
	PublishDuration  Histogram
	DispatchDuration Histogram
	DeliveryDelay    Histogram
	// Replays counts the streams that asked for history (Last-Event-ID),
	// and ReplayedEvents the events their replays wrote.
	Replays        uint64
	ReplayedEvents uint64
	// TokenFailures counts the access tokens refused, by reason:
	// [TokenMissing], [TokenMalformed], [TokenSignature],
	// [TokenExpired], [TokenAudienceIssuer], [TokenGrants], [TokenOther].
	TokenFailures map[string]uint64
	// StoreErrors counts the failed calls to the store: recording an
	// update, reading history.
	StoreErrors uint64
	// Subscriptions is the number of this hub's active subscriptions
	// (with [WithSubscriptions]; 0 without).
	Subscriptions int
}

// Metrics returns a snapshot of the hub's counters. It takes a few locks
// briefly; call it at most a few times a second.
func (h *Hub) Metrics() Metrics {
	c := &h.metrics
	m := Metrics{
		Stats:            h.Stats(),
		StreamsOpened:    c.streamsOpened.Load(),
		StreamsClosed:    make(map[string]uint64, numEndReasons-1),
		UpdatesPublished: map[string]uint64{"http": c.publishedHTTP.Load(), "go": c.publishedGo.Load(), "tx": c.publishedTx.Load()},
		UpdatesRefused:   make(map[string]uint64, len(refusalStatuses)),
		Deliveries:       c.deliveries.Load(),
		DeliveredBytes:   c.deliveredBytes.Load(),
		PublishDuration:  c.publishDuration.snapshot(),
		DispatchDuration: c.dispatchDuration.snapshot(),
		DeliveryDelay:    c.deliveryDelay.snapshot(),
		Replays:          c.replays.Load(),
		ReplayedEvents:   c.replayed.Load(),
		TokenFailures:    make(map[string]uint64, len(tokenReasons)),
		StoreErrors:      c.storeErrors.Load(),
	}
	for i := endReason(1); i < numEndReasons; i++ {
		m.StreamsClosed[closeReasons[i]] = c.streamsClosed[i].Load()
	}
	for i, r := range refusalStatuses {
		m.UpdatesRefused[r] = c.refused[i].Load()
	}
	for i, r := range tokenReasons {
		m.TokenFailures[r] = c.tokenFailures[i].Load()
	}
	h.subscriptions.mu.Lock()
	m.Subscriptions = len(h.subscriptions.active)
	h.subscriptions.mu.Unlock()
	return m
}
