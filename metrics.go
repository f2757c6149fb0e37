package mercure

import (
	"sync/atomic"

	"github.com/mercurekit/mercure/internal/engine"
	"github.com/mercurekit/mercure/internal/hist"
)

// The hub counts what it does with plain atomic counters, updated whether
// or not anything reads them: a few atomic adds per update and per
// stream, none per delivery (the dispatcher adds its deliveries once per
// dispatch). [Hub.Metrics] copies them; the promhub package exposes them
// to Prometheus at scrape time, so that this package never depends on a
// metrics library.

// A CloseReason is why a stream ended: a key of [Metrics].StreamsClosed,
// the label value of mercure_streams_closed_total{reason}.
type CloseReason string

// The reasons a stream ends.
const (
	CloseClientGone    CloseReason = "client_gone"    // the client left
	CloseTokenExpired  CloseReason = "token_expired"  // the subscriber's token expired
	CloseLifetime      CloseReason = "lifetime"       // the maximum lifetime ended (see [Limits].StreamLifetime)
	CloseQueueOverflow CloseReason = "queue_overflow" // the client fell behind (see [Limits.QueueEvents])
	CloseWriteError    CloseReason = "write_error"    // a write failed or timed out
	CloseHistoryGap    CloseReason = "history_gap"    // the store's feed or a replay skipped events
	CloseReplayError   CloseReason = "replay_error"   // history could not be read, or the replay took too long
	CloseShutdown      CloseReason = "shutdown"       // the hub shut down
	CloseRevoked       CloseReason = "revoked"        // WithAuthorizer: the session behind the stream ended
	CloseGrantsChanged CloseReason = "grants_changed" // WithAuthorizer: the session's subscribe grants or payload changed
)

// closeReasons names the engine's end reasons.
var closeReasons = [engine.NumEndReasons]CloseReason{
	engine.EndClientGone:    CloseClientGone,
	engine.EndTokenExpired:  CloseTokenExpired,
	engine.EndLifetime:      CloseLifetime,
	engine.EndQueueOverflow: CloseQueueOverflow,
	engine.EndWriteError:    CloseWriteError,
	engine.EndHistoryGap:    CloseHistoryGap,
	engine.EndReplayError:   CloseReplayError,
	engine.EndShutdown:      CloseShutdown,
	engine.EndRevoked:       CloseRevoked,
	engine.EndGrantsChanged: CloseGrantsChanged,
}

// A TokenFailure is why an access token was refused: a key of
// [Metrics].TokenFailures, the label value of
// mercure_token_failures_total{reason}. A refusal's error_description
// names the same cause. A token whose header or claims are malformed is
// refused for that before its signature is checked, never counted as a
// bad signature.
type TokenFailure string

// The reasons a token is refused.
const (
	TokenMissing     TokenFailure = "missing"       // none presented where one is required
	TokenMalformed   TokenFailure = "malformed"     // not a Bearer JWS, too large, bad JSON, a required claim missing, invalid grants
	TokenSignature   TokenFailure = "signature"     // no trusted key fits, or the signature does not verify
	TokenAlgorithm   TokenFailure = "algorithm"     // alg missing or not allowed
	TokenType        TokenFailure = "type"          // typ is not at+jwt
	TokenLegacyClaim TokenFailure = "legacy_claim"  // a pre-standard token (mercure claim) without WithLegacyClients
	TokenExpired     TokenFailure = "expired"       // exp passed
	TokenNotYetValid TokenFailure = "not_yet_valid" // nbf or iat ahead of the hub's clock
	TokenAudience    TokenFailure = "audience"      // aud does not name the hub
	TokenIssuer      TokenFailure = "issuer"        // iss missing or not trusted
	TokenGrants      TokenFailure = "grants"        // valid, but no grant for a topic published or a resource of the API (403)
	TokenOther       TokenFailure = "other"         // any other failure (an issuer's keys not fetched yet...)
)

var tokenReasons = [...]TokenFailure{TokenMissing, TokenMalformed, TokenSignature, TokenAlgorithm, TokenType, TokenLegacyClaim,
	TokenExpired, TokenNotYetValid, TokenAudience, TokenIssuer, TokenGrants, TokenOther}

// tokenReasonIndex returns the index of reason in tokenReasons, that of
// TokenOther when it is none.
func tokenReasonIndex(reason TokenFailure) int {
	for i, r := range tokenReasons {
		if r == reason {
			return i
		}
	}
	return len(tokenReasons) - 1
}

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

// counters are the hub's metrics; the engine keeps those of its streams
// (see [engine.Counters]).
type counters struct {
	publishedHTTP atomic.Uint64
	publishedGo   atomic.Uint64
	publishedTx   atomic.Uint64
	refused       [len(refusalStatuses)]atomic.Uint64
	replays       atomic.Uint64
	replayed      atomic.Uint64
	tokenFailures [len(tokenReasons)]atomic.Uint64
	storeErrors   atomic.Uint64
	// subscribesDeferred counts temporary refusals answered as a stream
	// that retries (see Hub.unavailable).
	subscribesDeferred atomic.Uint64

	publishDuration hist.Histogram
}

func (c *counters) tokenFailure(reason TokenFailure) {
	c.tokenFailures[tokenReasonIndex(reason)].Add(1)
}

// snapshot copies h.
func snapshot(h *hist.Histogram) Histogram {
	buckets, count, sum := h.Snapshot()
	return Histogram{Bounds: hist.Bounds[:], Buckets: buckets, Count: count, Sum: sum}
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
	// Streams is the number of subscriber connections open now. A
	// connection counts from when it takes its slot, a moment before it
	// receives updates and before it starts (see StreamsOpened).
	Streams int
	// Dispatched counts the updates this hub has dispatched to its
	// subscribers, including those published through other hubs sharing
	// its store.
	Dispatched uint64
	// Overflows counts the streams disconnected because they fell behind
	// (see [Limits].QueueEvents and QueueBytes).
	Overflows uint64
	// QueuedBytes is the memory the streams' queues take now, as
	// [Limits].MaxQueuedBytes counts it: each waiting event's bytes once,
	// however many queues share them, and a few words per queue entry.
	QueuedBytes int64
	// FeedError is why the store's live feed is failing, nil while it
	// works. While it fails, the hub's subscribers get no update from any
	// hub; they get the missed ones once it recovers (or, if history
	// dropped some meanwhile, their streams end and they resume from
	// history). [Hub.Ready] reports it.
	FeedError error

	// StreamsOpened counts the streams that started: their status and
	// headers sent, each receiving every update published since it took
	// its slot. StreamsClosed counts those that ended, by reason: the
	// difference is the number of started streams open. A subscribe
	// request refused before its stream started is in neither: when its
	// replay cannot begin (too many replays, history unavailable), and
	// when its stream cannot start, because more updates came than its
	// queue holds (see [Limits].QueueEvents) before its headers were sent,
	// or because the hub began shutting down: it gets 503 with
	// Retry-After (see SubscribesDeferred), and its client comes back.
	StreamsOpened uint64
	StreamsClosed map[CloseReason]uint64
	// UpdatesPublished counts the updates recorded, by source: "http"
	// (POST), "go" ([Hub.Publish]) or "tx" (recorded by the store in the
	// application's transaction, such as pgstore's PublishTx: see
	// [store.OutboxStore]; counted when the store records it in the
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
	// ([store.Event.Time]) to its write to a stream, sampled: the first event
	// written to each stream, then one in 64.
	PublishDuration  Histogram
	DispatchDuration Histogram
	DeliveryDelay    Histogram
	// Replays counts the streams that asked for history (Last-Event-ID),
	// and ReplayedEvents the events their replays wrote.
	Replays        uint64
	ReplayedEvents uint64
	// TokenFailures counts the access tokens refused, by reason.
	TokenFailures map[TokenFailure]uint64
	// StoreErrors counts the failed calls to the store: recording an
	// update, reading history.
	StoreErrors uint64
	// SubscribesDeferred counts the subscribe requests refused for now
	// (503: the store's history or the authorizer unavailable, too many
	// replays, a stream that could not start, a hub shutting down; 429:
	// a connection or pattern budget spent) that were answered, because
	// their client prefers an event stream (a browser's EventSource),
	// with 200 and a stream holding only a comment with the status and a
	// retry field: the client reconnects then instead of giving up.
	// Clients that read problem documents get the status and are not
	// counted.
	SubscribesDeferred uint64
	// Subscriptions is the number of this hub's active subscriptions
	// (with [WithSubscriptions]; 0 without).
	Subscriptions int
}

// Metrics returns a snapshot of the hub's counters. It takes a few locks
// briefly; call it at most a few times a second.
func (h *Hub) Metrics() Metrics {
	c, ec := &h.ops.metrics, h.engine.Counters()
	m := Metrics{
		Streams:          h.engine.Streams(),
		Dispatched:       ec.Dispatched.Load(),
		Overflows:        ec.Overflows.Load(),
		QueuedBytes:      h.engine.QueuedBytes(),
		StreamsOpened:    ec.StreamsOpened.Load(),
		StreamsClosed:    make(map[CloseReason]uint64, engine.NumEndReasons-1),
		UpdatesPublished: map[string]uint64{"http": c.publishedHTTP.Load(), "go": c.publishedGo.Load(), "tx": c.publishedTx.Load()},
		UpdatesRefused:   make(map[string]uint64, len(refusalStatuses)),
		Deliveries:       ec.Deliveries.Load(),
		DeliveredBytes:   ec.DeliveredBytes.Load(),
		PublishDuration:  snapshot(&c.publishDuration),
		DispatchDuration: snapshot(&ec.DispatchDuration),
		DeliveryDelay:    snapshot(&ec.DeliveryDelay),
		Replays:          c.replays.Load(),
		ReplayedEvents:   c.replayed.Load(),
		TokenFailures:    make(map[TokenFailure]uint64, len(tokenReasons)),
		StoreErrors:      c.storeErrors.Load(),

		SubscribesDeferred: c.subscribesDeferred.Load(),
	}
	for i := engine.EndReason(1); i < engine.NumEndReasons; i++ {
		m.StreamsClosed[closeReasons[i]] = ec.StreamsClosed[i].Load()
	}
	for i, r := range refusalStatuses {
		m.UpdatesRefused[r] = c.refused[i].Load()
	}
	for i, r := range tokenReasons {
		m.TokenFailures[r] = c.tokenFailures[i].Load()
	}
	if err := h.ops.feedErr.Load(); err != nil {
		m.FeedError = *err
	}
	h.presence.mu.Lock()
	m.Subscriptions = len(h.presence.active)
	h.presence.mu.Unlock()
	return m
}
