package mercure

import (
	"context"
	"sync"
	"sync/atomic"
)

// operations is the hub's life and what operators see of it: shutdown,
// metrics, the store's health, the debugger.
type operations struct {
	// life guards closed.
	life   sync.Mutex
	closed bool
	ctx    context.Context // canceled when Shutdown starts
	stop   context.CancelFunc
	// events bounds the announcements of subscriptions (their events):
	// canceled when Shutdown stops waiting for streams.
	events     context.Context
	stopEvents context.CancelFunc
	// background counts the hub's own goroutines (the Authorizer's
	// re-checks, the debugger's sampler), for Shutdown.
	background sync.WaitGroup
	shutting   atomic.Bool // Shutdown has begun (a drain, then the end)

	metrics counters              // see Metrics
	feedErr atomic.Pointer[error] // nil while the store's feed works
	appends transition            // the store refusing updates, logged once per transition
	reads   transition            // the store failing replays, likewise
	debug   *debugger             // nil without WithDebugger

	// deferredOnce is whether a deferred refusal was logged at Warn
	// already (see Hub.unavailable); warnedReadDeadlines whether a writer
	// that cannot set read deadlines was (see limitBodyTime).
	deferredOnce        atomic.Bool
	warnedReadDeadlines atomic.Bool
	// templateOnce is whether a URL pattern that looks like a URI
	// template was logged at Warn already (see Hub.newMatcher).
	templateOnce atomic.Bool
}

// start begins the hub's life.
func (o *operations) start() {
	o.ctx, o.stop = context.WithCancel(context.Background())
	o.events, o.stopEvents = context.WithCancel(context.Background())
}
