package mercure

import "github.com/mercurekit/mercure/internal/engine"

// WithLowMemoryStreams makes HTTP/1.1 streams cost a fraction of the
// memory: once a stream's headers (and its replay, if any) are sent, the
// hub takes its connection over from net/http, so that an idle stream
// holds no goroutine and no net/http buffers (about 1 to 3 KB instead of
// about 25 KB). Writes are done by a small pool of writer goroutines
// (4 per CPU, at least 16), as events, keep-alives and endings come due;
// on Linux one goroutine per hub watches the connections (epoll) to notice
// clients that leave.
//
// A writer never waits for a client: it writes what the connection takes
// at once, and the rest when the connection can take more (on Linux the
// same goroutine watches for that; elsewhere the write is retried, backing
// off up to 64ms). Meanwhile new events wait in the stream's queue. The
// write timeout ([WithWriteTimeout]) cuts a stream whose connection took
// nothing for that long. Over TLS, where a write cannot be tried without
// blocking, each write runs on a goroutine of its own, which lives as long
// as the write, bounded by the write timeout.
//
// Streams behave as without it (write timeouts, keep-alives, overflows,
// maximum lifetimes, shutdown and limits), with these trade-offs:
//
//   - HTTP/2 streams, and streams behind middleware that cannot give up
//     the connection (no Hijack reachable through Unwrap, or a body
//     transformed by a Content-Encoding), are served as usual; the hub
//     logs that once.
//   - The response says Connection: close: a connection that carried a
//     stream is not reused for another request.
//   - A taken-over connection is invisible to [http.Server]: its
//     Shutdown and Close neither wait for it nor close it, and ConnState
//     reports it as hijacked. [Hub.Shutdown] ends these streams as it
//     ends the others; call it first.
//   - A client that sends anything once its stream is open (a pipelined
//     request, or a half-close) is taken to be gone, and its stream ends.
//   - On systems other than Linux, each stream keeps one goroutine,
//     blocked reading its connection; it still sheds net/http's buffers.
func WithLowMemoryStreams() Option {
	return func(c *config) error {
		c.lowMemory = true
		return nil
	}
}

// lowMemoryByDefault turns WithLowMemoryStreams on for every hub: tests
// set it, to run the whole suite in this mode.
var lowMemoryByDefault bool

// engineConfig is the configuration of the hub's stream engine.
func (h *Hub) engineConfig() engine.Config {
	lim := &h.cfg.limits
	return engine.Config{
		Log:      h.log,
		Resolver: h.resolver,
		Limits: engine.Limits{
			QueueEvents:             lim.QueueEvents,
			QueueBytes:              lim.QueueBytes,
			MaxQueuedBytes:          lim.MaxQueuedBytes,
			MaxPendingUpdates:       lim.MaxPendingUpdates,
			MaxConnections:          lim.MaxConnections,
			MaxConnectionsPerClient: lim.MaxConnectionsPerClient,
			MaxPatternsPerPrefix:    lim.MaxPatternsPerPrefix,
			MaxPatternsPerTopic:     lim.MaxPatternsPerTopic,
			MaxTotalPatternSize:     lim.MaxTotalPatternSize,
		},
		KeepAlive:    h.cfg.keepAlive,
		WriteTimeout: h.cfg.writeTimeout,
		WriteDelay:   h.cfg.writeDelay,
		Detach:       h.cfg.lowMemory,
		NoPoller:     h.cfg.noPoller,
	}
}
