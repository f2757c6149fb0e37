// Package engine runs a hub's streams: the feed between the store and
// the streams, the dispatch of each event to the streams whose matchers
// select it, each stream's bounded queue, and the writers that send the
// queues to the subscribers, either a goroutine per stream or, for
// HTTP/1.1 connections taken over from net/http, a small pool of writers
// woken by events, timers and a poller.
//
// The hub (the root package) parses and authorizes requests and speaks
// the protocol; it hands each stream to [Engine.Serve], which runs it from
// its registration to its end, calling back the hub's replay of history
// on the way, and the stream's [Subscriber] answers for its rights and
// cleans up after it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure/internal/hist"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/topicurl"
)

// Config configures an [Engine]. Every field must be set.
type Config struct {
	Log      *slog.Logger
	Resolver *topicurl.Resolver
	Limits   Limits
	// KeepAlive is the idle time after which a stream gets a comment.
	KeepAlive time.Duration
	// WriteTimeout bounds each write: a connection that takes nothing for
	// that long ends its stream.
	WriteTimeout time.Duration
	// StallGrace is how long a stream's connection may take nothing of
	// what its writer hands it before the stream counts as stalled: past
	// its queue's bound, or past the queues' budget, it then ends for
	// overflow. 0: a quarter of WriteTimeout.
	StallGrace time.Duration
	// WriteDelay spaces each stream's writes at least that far apart.
	WriteDelay time.Duration
	// Detach takes HTTP/1.1 connections over from net/http once their
	// stream is set up (see [Engine.Serve]).
	Detach bool
	// NoPoller runs detached streams as on systems without a poller: a
	// goroutine reads each connection, and unfinished writes are retried
	// on a timer.
	NoPoller bool
	// InterestLinger is how long the store keeps reading a topic that no
	// stream needs any more (see [Engine.FollowInterest]); 0 means
	// DefaultInterestLinger.
	InterestLinger time.Duration
}

// Limits are the hub's limits that the engine enforces.
type Limits struct {
	QueueEvents, QueueBytes int
	MaxQueuedBytes          int64
	MaxPendingUpdates       int
	MaxConnections          int
	MaxConnectionsPerClient int
	// MaxAnonymousConnections caps the anonymous streams: they can never
	// take the connections that token and session holders need.
	MaxAnonymousConnections int
	// MaxAnonymousPerClient caps the anonymous streams of one client,
	// within MaxAnonymousConnections: one address cannot take the whole
	// anonymous share. 0: no cap.
	MaxAnonymousPerClient int
	// AnonymousShare applies the anonymous streams' share of the budgets
	// (connections, patterns): on a hub where a token or a session can
	// authorize a stream. Where none can, every stream is anonymous, and
	// has the whole budgets.
	AnonymousShare       bool
	MaxPatternsPerPrefix int
	MaxPatternsPerTopic  int
	MaxTotalPatternSize  int
	// MaxSizePerTopic and MaxAnonymousSizePerTopic cap, for the new
	// patterns of a stream with a token or a session and of an anonymous
	// one, the estimated size of what one topic can be evaluated against
	// (see [index.Index.WorkThrough]). Unlike the share above, they apply
	// to anonymous streams on any hub: they are the pattern limits of
	// the stream's class. 0: no cap.
	MaxSizePerTopic          int
	MaxAnonymousSizePerTopic int
}

// Counters are the engine's metrics, updated whether or not anything
// reads them.
type Counters struct {
	Dispatched atomic.Uint64
	Overflows  atomic.Uint64
	// Shed counts the stalled streams ended because the queues were over
	// their budget (also in Overflows); FeedGaps the times the engine
	// dropped the events waiting for the dispatcher because it was too
	// far behind the store's feed.
	Shed           atomic.Uint64
	FeedGaps       atomic.Uint64
	Deliveries     atomic.Uint64
	DeliveredBytes atomic.Uint64
	// StreamsOpened counts the streams that started (their status and
	// headers written), StreamsClosed those of them that ended, by
	// reason: a stream that never started is in neither (see
	// [ErrNotStarted]).
	StreamsOpened atomic.Uint64
	StreamsClosed [NumEndReasons]atomic.Uint64
	// DispatchDuration is the fan-out of one event to the streams'
	// queues; DeliveryDelay from an event's Time to its write to a
	// stream, sampled (the first event written to each stream, then one
	// in DelaySampleEvery).
	DispatchDuration hist.Histogram
	DeliveryDelay    hist.Histogram
}

// DelaySampleEvery is how many events a stream writes per sample of the
// delivery delay: its first, then one in this many.
const DelaySampleEvery = 64

// Errors of [Engine.Serve] and [Engine.Refuse].
var (
	ErrClosed            = errors.New("the hub is shutting down")
	ErrTooManyStreams    = errors.New("too many connections")
	ErrTooManyFromClient = errors.New("too many connections from this client")
	ErrTooManyAnonymous  = errors.New("too many anonymous connections: authenticate to subscribe")
	// ErrTooManyAnonymousFromClient: the client holds its share of the
	// anonymous streams.
	ErrTooManyAnonymousFromClient = errors.New("too many anonymous connections from this client: authenticate to subscribe")
	// ErrPatterns wraps why a stream's URL patterns were refused.
	ErrPatterns = errors.New("URL pattern budget exceeded")
	// ErrNotStarted wraps why a registered stream ended before any byte
	// of it was written: ErrClosed (the engine stopped), or ErrBehind.
	// The caller answers the request (a temporary refusal).
	ErrNotStarted = errors.New("the stream could not start")
	// ErrBehind: the stream's queue filled up before its headers were
	// sent: it could not start without missing updates.
	ErrBehind = errors.New("more updates came than the stream could queue before it started")
)

// Engine runs the streams of one hub.
type Engine struct {
	cfg      Config
	log      *slog.Logger
	resolver *topicurl.Resolver

	// mu guards the subscriber index. Dispatch holds it only to look the
	// index up (see dispatch).
	mu    sync.Mutex
	index *index.Index[*Stream]
	// patternsUsed is whether the index has held a URL pattern: until it
	// has, dispatch does not resolve topics as URLs.
	patternsUsed atomic.Bool
	last         atomic.Pointer[Position] // the latest event recorded (see Last)
	feed         feed
	interest     interest // what the store's feed is told to read
	// waiting counts the publishers waiting for room; lastShed is when
	// the dispatcher last shed stalled streams; dispatchWaits is whether
	// the dispatcher waits for the queues to be back under their budget,
	// and budgetRoom tells it they may be (see waitBudget).
	waiting       atomic.Int32
	lastShed      atomic.Int64 // unix nanoseconds
	dispatchWaits atomic.Bool
	budgetRoom    chan struct{}
	dispatcher

	// life guards closed, counts and the stream WaitGroup; a stream
	// joins streams under it, and leaves it without it.
	life    sync.Mutex
	closed  bool
	ctx     context.Context // canceled by Stop
	stop    context.CancelFunc
	streams registry
	active  sync.WaitGroup
	counts  connCounter

	// sweeping is whether the keep-alive sweep runs (under life).
	sweeping bool
	sweeps   sync.WaitGroup

	queued   atomic.Int64 // bytes in the streams' queues
	counters Counters
	// warnedDeadlines is whether a response writer that cannot set write
	// deadlines was logged.
	warnedDeadlines atomic.Bool

	conns   conns // the detached streams
	writers writers
}

// connCounter enforces the connection limits (SUB-12).
type connCounter struct {
	total, anonymous int
	perClient        map[string]int
	anonPerClient    map[string]int // anonymous streams only
}

// New returns an engine.
func New(cfg Config) *Engine {
	e := &Engine{
		cfg:      cfg,
		log:      cfg.Log,
		resolver: cfg.Resolver,
		index:    index.New[*Stream](cfg.Resolver),
		counts:   connCounter{perClient: make(map[string]int), anonPerClient: make(map[string]int)},

		budgetRoom: make(chan struct{}, 1),
	}
	e.conns.noPoll = cfg.NoPoller
	e.writers.init(e)
	e.ctx, e.stop = context.WithCancel(context.Background())
	return e
}

// Counters returns the engine's counters.
func (e *Engine) Counters() *Counters { return &e.counters }

// QueuedBytes is the memory the streams' queues take now, as
// Limits.MaxQueuedBytes counts it: each event's bytes once, however many
// queues share them, and entryCost per queue entry (give or take the
// event being dispatched).
func (e *Engine) QueuedBytes() int64 { return max(e.queued.Load(), 0) }

// Streams is the number of streams open now.
func (e *Engine) Streams() int {
	e.life.Lock()
	defer e.life.Unlock()
	return e.counts.total
}

// Refuse reports, without reserving anything, whether a stream of client
// would be refused now (ErrClosed, ErrTooManyStreams,
// ErrTooManyFromClient): checked before a request is parsed, so that a
// client over its limit cannot make the hub compile its patterns.
func (e *Engine) Refuse(client string) error {
	e.life.Lock()
	defer e.life.Unlock()
	return e.refuseLocked(client)
}

// refuseLocked applies the connection limits (SUB-12). The caller holds
// e.life.
func (e *Engine) refuseLocked(client string) error {
	lim := &e.cfg.Limits
	switch {
	case e.closed:
		return ErrClosed
	case lim.MaxConnections > 0 && e.counts.total >= lim.MaxConnections:
		return ErrTooManyStreams
	case lim.MaxConnectionsPerClient > 0 && e.counts.perClient[client] >= lim.MaxConnectionsPerClient:
		return ErrTooManyFromClient
	}
	return nil
}

// open registers s with its matchers, enforcing the connection limits
// (SUB-12) and the pattern budgets. Once it returns nil, the stream gets
// every event pushed from now on that its matchers select, and must be
// closed. The URL patterns of ms are replaced by the index's interned
// copies.
func (e *Engine) open(s *Stream, ms []Matcher) error {
	e.life.Lock()
	err := e.refuseLocked(s.client)
	if lim := &e.cfg.Limits; err == nil && s.anonymous && lim.AnonymousShare {
		switch {
		case e.counts.anonymous >= lim.MaxAnonymousConnections:
			err = ErrTooManyAnonymous
		case lim.MaxAnonymousPerClient > 0 && e.counts.anonPerClient[s.client] >= lim.MaxAnonymousPerClient:
			err = ErrTooManyAnonymousFromClient
		}
	}
	if err != nil {
		e.life.Unlock()
		return err
	}
	if s.anonymous {
		e.counts.anonymous++
		e.counts.anonPerClient[s.client]++
	}
	e.counts.total++
	e.counts.perClient[s.client]++
	e.streams.add(s)
	e.active.Add(1)
	e.sweepLocked()
	e.life.Unlock()

	if err := e.register(s, ms); err != nil {
		e.release(s)
		return err
	}
	return nil
}

// release frees the connection slot and lifetime accounting of s.
func (e *Engine) release(s *Stream) {
	e.streams.remove(s)
	e.life.Lock()
	e.counts.total--
	if s.anonymous {
		e.counts.anonymous--
		if e.counts.anonPerClient[s.client]--; e.counts.anonPerClient[s.client] == 0 {
			delete(e.counts.anonPerClient, s.client)
		}
	}
	if e.counts.perClient[s.client]--; e.counts.perClient[s.client] == 0 {
		delete(e.counts.perClient, s.client)
	}
	e.life.Unlock()
	e.active.Done()
}

// Stop refuses new streams and ends the open ones: each writes what it
// holds and a clean end (or, stuck on its peer, waits for AbortAll).
func (e *Engine) Stop() {
	e.life.Lock()
	e.closed = true
	e.life.Unlock()
	e.stop()
	e.stopInterest()
	for _, s := range e.snapshot() {
		s.wake()
	}
}

// stopped reports whether Stop was called.
func (e *Engine) stopped() bool { return e.ctx.Err() != nil }

// shutdownGrace is how long Wait lets streams end on their own before
// it cuts the writes of those stuck on peers that stopped reading.
const shutdownGrace = time.Second

// Wait waits until every stream has ended, after Stop: it lets them end
// on their own for a grace period, then cuts the writes of those stuck on
// peers that stopped reading. When ctx ends first, it cuts them all and
// returns ctx's error.
func (e *Engine) Wait(ctx context.Context) error {
	finished := make(chan struct{})
	go func() {
		e.active.Wait()
		e.writers.wg.Wait() // the writers of the detached streams
		e.conns.wg.Wait()   // their poller, readers and writes on goroutines
		e.sweeps.Wait()
		close(finished)
	}()
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	select {
	case <-finished:
		return nil
	case <-grace.C:
		e.AbortAll()
	case <-ctx.Done():
		e.AbortAll()
		return ctx.Err()
	}
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// snapshot returns the open streams, as the registry's shards hold them
// one after the other (see registry.each).
func (e *Engine) snapshot() []*Stream {
	streams := make([]*Stream, 0, e.Streams())
	e.streams.each(func(ss []*Stream) { streams = append(streams, ss...) })
	return streams
}

// AbortAll makes every write still blocked on a peer fail now, and ends
// every stream without a clean end (shutdown, unless a stream ended for
// another reason already). The streams are aborted after e.life is
// released: on HTTP/2, cutting a write is a message to the connection's
// own goroutine.
func (e *Engine) AbortAll() {
	for _, s := range e.snapshot() {
		s.abort(EndShutdown)
	}
}

// Matcher is one matcher of a stream, for the index.
type Matcher struct {
	Kind    index.Kind
	Value   string
	Pattern *index.Pattern // compiled, for the kinds that are evaluated
}

// register adds the matchers of s to the index, unless its new patterns
// would exceed the pattern budgets; it then returns why, wrapping
// ErrPatterns. Patterns already registered are always accepted: sharing
// one costs nothing. An anonymous stream's new patterns must leave half
// of each budget free: anonymous clients can never take what token and
// session holders need. Besides, the new patterns of a stream must keep
// what one topic can be evaluated against within its class's size
// (MaxSizePerTopic, MaxAnonymousSizePerTopic).
func (e *Engine) register(s *Stream, ms []Matcher) error {
	// The store reads the topics of s before s takes its start position.
	e.acquire(s, ms)
	if err := e.addMatchers(s, ms); err != nil {
		e.releaseInterest(s, ms)
		return err
	}
	return nil
}

// addMatchers adds the matchers of s to the index, as register says.
func (e *Engine) addMatchers(s *Stream, ms []Matcher) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Events recorded until now are not live for s, though the dispatcher
	// may not have handed them out yet: a stream gets what is published
	// after it opens, and what it asks for from history.
	s.h.start = e.Last()
	s.lastSeq = s.h.start.Seq
	perPrefix, perTopic, total := e.cfg.Limits.MaxPatternsPerPrefix, e.cfg.Limits.MaxPatternsPerTopic, e.cfg.Limits.MaxTotalPatternSize
	who := ""
	if s.anonymous && e.cfg.Limits.AnonymousShare {
		perPrefix, perTopic, total = perPrefix/2, perTopic/2, total/2
		who = " for anonymous subscribers"
	}
	perTopicSize, class := e.cfg.Limits.MaxSizePerTopic, ""
	if s.anonymous {
		perTopicSize, class = e.cfg.Limits.MaxAnonymousSizePerTopic, " for anonymous subscribers"
	}
	for i := range ms {
		m := &ms[i]
		shared := m.Kind.Evaluated() && e.index.Has(m.Pattern)
		s.entries = append(s.entries, e.index.Add(m.Kind, m.Value, m.Pattern, s))
		if !m.Kind.Evaluated() {
			continue
		}
		m.Pattern = e.index.Shared(m.Pattern) // share the interned copy
		e.patternsUsed.Store(true)
		var refused string
		switch {
		case e.index.SamePrefix(m.Pattern) > perPrefix:
			refused = "too many distinct URL patterns with the same literal prefix" + who
		case e.index.MaxPerTopic() > perTopic:
			refused = "too many distinct URL patterns would be evaluated for the same topics" + who
		case e.index.PatternSize() > total:
			refused = "the hub holds too many URL patterns" + who
		case !shared && perTopicSize > 0 && e.index.WorkThrough(m.Pattern) > perTopicSize:
			refused = fmt.Sprintf("the URL patterns that the same topics would be evaluated against would compile to about %d instructions, more than %d%s: use patterns with a longer literal prefix, or that end with a literal path segment",
				e.index.WorkThrough(m.Pattern), perTopicSize, class)
		default:
			continue
		}
		for _, en := range s.entries {
			e.index.Remove(en)
		}
		s.entries = nil
		return &patternError{refused}
	}
	return nil
}

// patternError says why a stream's patterns were refused.
type patternError struct{ msg string }

func (p *patternError) Error() string { return p.msg }
func (p *patternError) Unwrap() error { return ErrPatterns }

// unregister removes the matchers of s from the index.
func (e *Engine) unregister(s *Stream) {
	e.mu.Lock()
	for _, en := range s.entries {
		e.index.Remove(en)
	}
	e.mu.Unlock()
	if e.interest.want != nil { // set before any stream opens
		e.releaseInterest(s, matchersOf(s))
	}
}

// PatternsUsed reports whether the index has held a URL pattern: until
// it has, no event needs its topics resolved as URLs.
func (e *Engine) PatternsUsed() bool { return e.patternsUsed.Load() }
