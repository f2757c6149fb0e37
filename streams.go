package mercure

import "github.com/mercurekit/mercure/internal/engine"

// How a hub writes its streams. By default, once an HTTP/1.1 stream's
// headers (and its replay, if any) are sent, the hub takes its connection
// over from net/http: an idle stream then holds no goroutine and no
// net/http buffers (about 2 KB instead of about 25 KB), and a small pool
// of writers (one per processor) writes the streams that have something
// to write, as events, keep-alives and endings come due, each in one
// system call from the events' shared bytes. On Linux one goroutine per
// hub watches the connections (epoll), to notice clients that leave and
// connections that can take more.
//
// A writer never waits for a client: it writes what the connection takes
// at once, and the rest when the connection can take more (elsewhere than
// Linux the write is retried, backing off up to 64ms). Meanwhile new
// events wait in the stream's queue, counted by [Limits]. The write
// timeout ([Limits].WriteTimeout) cuts a stream whose connection took
// nothing for that long. Over TLS, where a write cannot be tried without
// blocking, each write runs on a goroutine of its own, which lives as
// long as the write, bounded by the write timeout.
//
// HTTP/2 streams, and streams behind middleware that cannot give up the
// connection (no Hijack reachable through Unwrap, or a body transformed
// by a Content-Encoding), are written by their handler's goroutine
// through net/http, as every stream is with [WithGoroutineStreams]; the
// hub logs the first such stream, once per reason. Both ways keep the
// same promises (write timeouts, keep-alives, overflows, maximum
// lifetimes, drains, shutdown and limits); a stream taken over differs
// in these ways:
//
//   - The response says Connection: close: a connection that carried a
//     stream is not reused for another request.
//   - A taken-over connection is invisible to [http.Server]: its
//     Shutdown and Close neither wait for it nor close it, and ConnState
//     reports it as hijacked. [Hub.Shutdown] ends these streams as it
//     ends the others; call it first.
//   - On Linux, the engine keeps a duplicate of the socket's descriptor
//     and closes the [net.Conn] the listener returned (an idle stream
//     then costs about 1.8 KB instead of 3 KB): closing that net.Conn
//     from outside, as code that tracks accepted connections may, no
//     longer ends the stream. Listeners that wrap their connections in
//     a type of their own (a connection limiter, say) are not affected:
//     their streams keep the net.Conn and write through it.
//   - A client that sends anything once its stream is open (a pipelined
//     request, or a half-close) is taken to be gone, and its stream ends.
//   - On systems other than Linux, each stream keeps one goroutine,
//     blocked reading its connection; it still sheds net/http's buffers.

// WithGoroutineStreams makes every stream be written by its handler's
// goroutine, through net/http's ResponseWriter, instead of taking HTTP/1.1
// connections over after their headers (see above). Each open stream
// then costs a goroutine and net/http's buffers, about 25 KB. Use it when
// something between net/http and the hub must see every byte of a stream
// (a middleware that counts or transforms bytes and cannot be unwrapped),
// when [http.Server] itself must track stream connections (its Shutdown
// waiting for them, ConnState, a listener that limits connections), or
// to compare the two.
func WithGoroutineStreams() Option {
	return func(c *config) error {
		c.goroutineStreams = true
		return nil
	}
}

// goroutineStreamsByDefault makes WithGoroutineStreams the default: tests
// set it, to run the whole suite that way too.
var goroutineStreamsByDefault bool

// engineConfig is the configuration of the hub's stream engine.
func (h *Hub) engineConfig() engine.Config {
	lim := &h.cfg.limits
	return engine.Config{
		Log:      h.log,
		Resolver: h.resolver,
		Limits: engine.Limits{
			QueueEvents:              lim.QueueEvents,
			QueueBytes:               lim.QueueBytes,
			MaxQueuedBytes:           lim.MaxQueuedBytes,
			MaxPendingUpdates:        lim.MaxPendingUpdates,
			MaxConnections:           lim.MaxConnections,
			MaxConnectionsPerClient:  lim.MaxConnectionsPerClient,
			MaxAnonymousConnections:  lim.MaxAnonymousConnections,
			MaxAnonymousPerClient:    h.anonymousPerClient(),
			AnonymousShare:           h.authorizesSubscribers(),
			MaxPatternsPerPrefix:     lim.MaxPatternsPerPrefix,
			MaxPatternsPerTopic:      lim.MaxPatternsPerTopic,
			MaxTotalPatternSize:      lim.MaxTotalPatternSize,
			MaxSizePerTopic:          lim.Patterns.MaxSizePerTopic,
			MaxAnonymousSizePerTopic: lim.AnonymousPatterns.MaxSizePerTopic,
		},
		KeepAlive:    h.cfg.limits.KeepAlive,
		WriteTimeout: h.cfg.limits.WriteTimeout,
		StallGrace:   h.cfg.stallGrace,
		WriteDelay:   h.cfg.limits.WriteDelay,
		Detach:       !h.cfg.goroutineStreams,
		NoPoller:     h.cfg.noPoller,
		// The default outside tests (see WithInterestLinger).
		InterestLinger: h.cfg.interestLinger,
	}
}

// anonymousPerClient is the cap on one client's anonymous streams (see
// [Limits.MaxAnonymousConnectionsPerClient]): by default a tenth of the
// anonymous share where the hub knows its clients apart (WithClientKey),
// none where every client may have a proxy's address.
func (h *Hub) anonymousPerClient() int {
	lim := &h.cfg.limits
	switch {
	case lim.MaxAnonymousConnectionsPerClient > 0:
		return lim.MaxAnonymousConnectionsPerClient
	case h.cfg.clientKeySet:
		return max(1, lim.MaxAnonymousConnections/10)
	}
	return 0
}
