// Package natsstore is a [store.Store] on a NATS JetStream stream, shared
// by every hub (in any number of processes) that uses the same stream:
// it lets several application instances act as one Mercure hub, with
// JetStream's replication keeping every acknowledged update on a
// majority of its servers. The servers may be an existing NATS cluster
// (connect to it with nats.Connect: URLs, credentials and TLS are the
// connection's) or nodes started inside the application's own processes
// (package github.com/mercurekit/mercure/natsembed): three instances of
// an application then are a replicated cluster, with no other server to
// run. It needs nats-server 2.11 or later.
//
// Layout: the stream (see [New]) holds one message per event, on the
// subject NAME.ID.TOPIC, where NAME is the stream's name, ID a hash of
// the update's id and TOPIC a hash of its topic, or "m" for an update
// with several topics. The message's data is the JSON of the event (its
// update fields and Time); its Seq is the message's stream sequence. A
// cursor resolves to the first retained message on NAME.ID.* whose
// update has that id (spec §Reconnection, State Reconciliation, and
// Event Sourcing): the server finds it in its subject index, without a
// scan of the history. Requests that must see every acknowledged append
// (the cursor, the retry check, the head of a replay) go to the stream's
// leader; the pages of a replay are direct gets, which any replica that
// is caught up may answer, read again until they reach the head.
//
// Appends are idempotent. A publisher's retry is recognised (see
// [store.Store.Append]): before it publishes, Append reads the latest
// message of the update's id; when it holds the same update, recorded
// within the retry window before the event's time, Append returns it.
// The message is published with a JetStream message id made of the
// update's digest and the sequence of that latest occurrence, so that
// the same update appended at once by several hubs, or published again
// after a lost acknowledgment, is recorded once (JetStream's duplicate
// window is the retry window, at least two minutes).
//
// Retention: the stream's limits ([WithMaxLen], [WithMaxBytes],
// [WithMaxAge]) drop the oldest messages first. A replay that retention
// overtakes ends with an error wrapping [store.ErrHistoryGap]; a feed
// that falls behind retention tells its listeners of the gap.
//
// Interest: a hub's feed reads only the messages of the topics its
// streams select exactly, and the updates with several topics (see
// [Store.ListenInterest]); a hub with a stream on a URL pattern or *
// reads everything.
//
// Outages: each call is bounded by [WithTimeout], so that Append fails
// rather than hang while no server answers (the hub answers 503). The
// connection is the application's: give it nats.MaxReconnects(-1), so
// that it never gives up, and a short nats.ReconnectWait (2 s by
// default). A server that stops answering without closing its
// connections (a hung process, a network that drops packets) is noticed
// by nats.go only by its pings, every two minutes by default: until then
// the connection does not move to another server of a cluster, and the
// store fails (its feed reports it within a second and the timeout). Set
// nats.PingInterval to a few seconds where that matters. The
// feed is a consumer of the stream that this store creates (ephemeral,
// in memory, without acknowledgments) and creates again, after the last
// event it delivered, when it loses it; it reports the outage to its
// listeners (see [store.Listener]) and resumes without a repeat. When it
// finds that the stream lost events it delivered (a server restarted
// without its data, a stream deleted and created again), it tells its
// listeners that the history was rewound, before any event of the new
// history; a stream that the servers lost is created again, empty, by
// the feed or by the next Append. The ids of the events the feed passed
// on that the history lost stay unknown cursors for a day (the bucket
// NAME_vanished): a client that got one resumes from the earliest event,
// not after a retry of its update that the new history recorded later.
// A replicated stream loses no acknowledged event while a majority of
// its replicas survives: JetStream acknowledges a message, and lets
// consumers read it, only once a majority has it.
package natsstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/textproto"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/store"
)

// ErrClosed is returned by Append and Replay once the store is closed.
var ErrClosed = errors.New("natsstore: store closed")

const (
	replayPage = 512     // events per page of Replay
	pageBytes  = 1 << 20 // bytes per page of Replay (at least one event)
	readCount  = 512     // events the feed's consumer has in flight
	// The feed reconnects after minBackoff, doubling up to maxBackoff:
	// the hub refuses to publish while its feed is down, so the feed must
	// come back within about a second of the servers.
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
	// block is how long the feed waits for an event before it checks
	// the connection and, every checkEvery, the history and its own
	// progress: a request to the stream's leader, within the timeout,
	// which tells a server that stopped answering too.
	block      = 200 * time.Millisecond
	checkEvery = time.Second
	// minDuplicates is the shortest duplicate window of the stream:
	// JetStream's own default, for the same update appended at once by
	// several hubs even with a retry window of 0.
	minDuplicates = 2 * time.Minute

	// DefaultTimeout bounds each call to the servers (see [WithTimeout]).
	DefaultTimeout = 5 * time.Second
	// DefaultMaxLen is how many events a store keeps unless [WithMaxLen]
	// says otherwise: history that any client may ask to replay (with
	// Last-Event-ID: earliest) must have a bound.
	DefaultMaxLen = 100_000
)

// Option configures [New]. Options validate their arguments: a bad value
// makes New fail with an error wrapping [mercure.ErrInvalidOption].
type Option func(*config) error

type config struct {
	maxLen   int64
	maxBytes int64
	maxAge   time.Duration
	replicas int // 0 until New resolves it: not given
	timeout  time.Duration
	window   time.Duration
	subTTL   time.Duration
	memory   bool
}

// WithMaxLen keeps at most n events in the stream (its MaxMsgs); 0 means
// no limit. The default is [DefaultMaxLen].
func WithMaxLen(n int64) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: natsstore.WithMaxLen(%d) is negative", mercure.ErrInvalidOption, n)
		}
		c.maxLen = n
		return nil
	}
}

// WithMaxBytes keeps at most n bytes of events in the stream (its
// MaxBytes); 0, the default, means no limit.
func WithMaxBytes(n int64) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: natsstore.WithMaxBytes(%d) is negative", mercure.ErrInvalidOption, n)
		}
		c.maxBytes = n
		return nil
	}
}

// WithMaxAge drops the events older than d from the stream (its MaxAge);
// 0, the default, means no limit.
func WithMaxAge(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: natsstore.WithMaxAge(%v) is negative", mercure.ErrInvalidOption, d)
		}
		c.maxAge = d
		return nil
	}
}

// WithReplicas keeps the stream, and the buckets of the shared
// subscriptions, on n servers (JetStream's replicas, 1 to 5): an append
// is acknowledged once a majority of them has it, so that the stream
// loses no acknowledged update while a majority survives. New applies it
// to an existing stream too. Without it, New keeps an existing stream's
// replicas (a hub started without the option does not scale a
// replicated stream down) and creates a stream with 1.
func WithReplicas(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("%w: natsstore.WithReplicas(%d) is not between 1 and 5", mercure.ErrInvalidOption, n)
		}
		c.replicas = n
		return nil
	}
}

// WithTimeout bounds each call the store makes to the servers (an
// append, the start of a replay, one page of a replay, a write of the
// shared subscriptions) and how long the feed may go without hearing
// from them before it is reported failing; it must be positive. The
// default is [DefaultTimeout].
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: natsstore.WithTimeout(%v) is not positive", mercure.ErrInvalidOption, d)
		}
		c.timeout = d
		return nil
	}
}

// WithRetryWindow sets how long after an update was recorded the same
// update appended again is taken for a retry and not recorded twice (see
// [store.Store.Append]); 0 records every publisher's append, and only
// the same append arriving twice at once is recognised. The default is
// [store.DefaultRetryWindow].
func WithRetryWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: natsstore.WithRetryWindow(%v) is negative", mercure.ErrInvalidOption, d)
		}
		c.window = d
		return nil
	}
}

// WithMemoryStorage keeps the stream in the servers' memory rather than
// in files: faster, but a server that restarts has lost its copy (a
// replicated stream gets it back from the other replicas).
func WithMemoryStorage() Option {
	return func(c *config) error {
		c.memory = true
		return nil
	}
}

// The store's interfaces, checked by the compiler: the hub finds the
// optional ones by a type assertion, which would otherwise fail silently.
var (
	_ store.LatestStore       = (*Store)(nil)
	_ store.SubscriptionStore = (*Store)(nil)
)

// Store is a [store.Store] on a JetStream stream. The zero value is not
// usable; call [New].
type Store struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	name string
	cfg  config

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	latest    store.Latest
	listeners store.Fanout
	// imu guards interest, and serialises the feed's deliveries with the
	// changes of interest (see interest.go).
	imu      sync.Mutex
	interest interest
	// read counts the messages the feed's consumers delivered.
	read atomic.Uint64
	// passed keeps the last events the feed passed on (see verify); the
	// feed's goroutine owns it.
	passed store.Passed
	// shorter is when verify first found the stream's state ending
	// before the last message the feed passed on, zero if it does not;
	// the feed's goroutine owns it.
	shorter time.Time

	presence presence
}

// New returns a store on the JetStream stream name, which it creates,
// or updates to the options' limits, replicas and the settings the store
// needs (its subjects name.>, a duplicate window, direct gets). Listeners
// receive every event appended after New returns, by any hub sharing the
// stream. Close stops the store; the connection stays open.
//
// New fails when the servers cannot be reached within the timeout: a hub
// should not start without its history.
func New(nc *nats.Conn, name string, opts ...Option) (*Store, error) {
	if nc == nil || name == "" {
		return nil, fmt.Errorf("%w: natsstore.New needs a connection and a stream name", mercure.ErrInvalidOption)
	}
	if !validName(name) {
		return nil, fmt.Errorf("%w: natsstore: %q is not a stream name (letters, digits, - and _)", mercure.ErrInvalidOption, name)
	}
	cfg := config{maxLen: DefaultMaxLen, timeout: DefaultTimeout, window: store.DefaultRetryWindow, subTTL: DefaultSubscriptionTTL}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil natsstore.Option", mercure.ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natsstore: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{nc: nc, js: js, name: name, cfg: cfg, ctx: ctx, cancel: cancel}
	fail := func(err error) (*Store, error) {
		// A writer of the shared subscriptions may have started: it
		// ends with the store that failed to open.
		if s.presence.done != nil {
			s.presence.stop()
		}
		cancel()
		s.wg.Wait()
		return nil, fmt.Errorf("natsstore: %w", err)
	}
	cctx, ccancel := context.WithTimeout(ctx, cfg.timeout)
	defer ccancel()
	if err := create(cctx, func(ctx context.Context) error {
		sc := s.streamConfig()
		if cfg.replicas == 0 { // not given: the stream's own, else 1
			sc.Replicas = 1
			switch st, err := js.Stream(ctx, name); {
			case err == nil:
				sc.Replicas = st.CachedInfo().Config.Replicas
			case !errors.Is(err, jetstream.ErrStreamNotFound):
				return err
			}
		}
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return err
		}
		// The buckets, and the stream if it must be made again, follow.
		s.cfg.replicas = sc.Replicas
		return nil
	}); err != nil {
		return fail(fmt.Errorf("stream %s: %w", name, err))
	}
	if err := s.presence.init(cctx, s); err != nil {
		return fail(err)
	}
	// The feed starts after the last event now.
	info, err := s.info(cctx)
	if err != nil {
		return fail(err)
	}
	last := info.LastSeq
	var lastEvent *store.Event
	if info.Msgs > 0 {
		if lastEvent, err = s.eventAt(cctx, last); err != nil {
			return fail(err)
		}
		if lastEvent != nil {
			s.latest.Seen(lastEvent.Seq, lastEvent.ID)
		}
	}
	s.interest.through = last // the feed reads from there
	s.wg.Add(1)
	go s.readLoop(last, lastEvent)
	return s, nil
}

// createAttempt bounds one request that creates or updates the stream or
// a bucket (see create), give or take half of it.
const createAttempt = time.Second

// create calls request, which creates or updates the stream or a bucket,
// again while it times out, each time for about createAttempt, until ctx
// ends. The servers of a cluster (nats-server 2.15) answer none of the
// identical creations or updates that several stores send at once, the
// hubs of a cluster started together, though they create the stream: the
// request after finds it, and returns at once. The attempts' bounds
// vary, so that the stores' next requests do not meet again.
func create(ctx context.Context, request func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, createAttempt/2+rand.N(createAttempt))
		err := request(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
			return err
		}
	}
}

// validName tells whether name can name a stream and the first token of
// its subjects.
func validName(name string) bool {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return len(name) <= 200
}

func (s *Store) streamConfig() jetstream.StreamConfig {
	dup := max(s.cfg.window, minDuplicates)
	if s.cfg.maxAge > 0 {
		dup = min(dup, s.cfg.maxAge)
	}
	storage := jetstream.FileStorage
	if s.cfg.memory {
		storage = jetstream.MemoryStorage
	}
	maxLen := s.cfg.maxLen
	if maxLen == 0 {
		maxLen = -1
	}
	maxBytes := s.cfg.maxBytes
	if maxBytes == 0 {
		maxBytes = -1
	}
	return jetstream.StreamConfig{
		Name:        s.name,
		Description: "Mercure hub history (github.com/mercurekit/mercure/natsstore)",
		Subjects:    []string{s.name + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     maxLen,
		MaxBytes:    maxBytes,
		MaxAge:      s.cfg.maxAge,
		Storage:     storage,
		Replicas:    s.cfg.replicas,
		Duplicates:  dup,
		AllowDirect: true,
	}
}

// Stream returns the name of the store's stream.
func (s *Store) Stream() string { return s.name }

// LatestID returns the id of the latest event this Store has appended or
// read from the stream, including the last one in the stream when New
// was called; [store.Earliest] if none. It implements
// [store.LatestStore].
func (s *Store) LatestID() string { return s.latest.ID() }

// Close stops the feed and withdraws this store's subscriptions from the
// shared list (see [Store.UpdateSubscriptions]). It does not close the
// connection.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.presence.stop()
		s.cancel()
		s.wg.Wait()
		s.presence.withdraw()
	})
	return nil
}

func (s *Store) closed() bool { return s.ctx.Err() != nil }

// hash is the subject token of an update id or a topic.
func hash(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:12])
}

// subject is the subject of an event's message.
func (s *Store) subject(e *store.Event) string {
	t := "m"
	if len(e.Topics) == 1 {
		t = hash(e.Topics[0])
	}
	return s.name + "." + hash(e.ID) + "." + t
}

// idSubject is the subjects of the messages of the updates with id.
func (s *Store) idSubject(id string) string { return s.name + "." + hash(id) + ".*" }

const digestHeader = "Mercure-Digest"

// Append implements [store.Store]. It returns once the stream recorded
// the event (a majority of its replicas); listeners get it from the feed,
// possibly later. It ignores ctx's cancellation: [WithTimeout] bounds it.
func (s *Store) Append(ctx context.Context, e *store.Event) error {
	if s.closed() {
		return ErrClosed
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	data, digest, err := store.MarshalEvent(e)
	if err != nil {
		return fmt.Errorf("natsstore: %w", err)
	}
	sum := hex.EncodeToString(digest[:])
	// The project's context contract: ctx carries values only; the store
	// bounds its own time. An update the hub accepted is recorded even
	// if its caller has gone.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.timeout)
	defer cancel()
	prev, err := s.getMsg(ctx, msgGetRequest{LastFor: s.idSubject(e.ID)})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// The servers lost the stream (restarted without their data, or
		// it was deleted): it is made again, as New made it, and the
		// feeds tell their listeners that the history was rewound.
		if err = s.createStream(ctx); err == nil {
			prev, err = s.getMsg(ctx, msgGetRequest{LastFor: s.idSubject(e.ID)})
		}
	}
	if err != nil {
		return fmt.Errorf("natsstore: append: %w", err)
	}
	var prevSeq uint64
	if prev != nil {
		prevSeq = prev.Seq
		if s.isRetry(prev, e, sum) {
			e.Seq = prev.Seq
			s.latest.Seen(e.Seq, e.ID)
			s.listeners.Appended(e.Seq)
			return nil
		}
	}
	msg := &nats.Msg{Subject: s.subject(e), Data: data, Header: nats.Header{}}
	msg.Header.Set(digestHeader, sum)
	// The same update after the same latest occurrence of its id is the
	// same append: JetStream records it once.
	msg.Header.Set(jetstream.MsgIDHeader, sum+"."+strconv.FormatUint(prevSeq, 10))
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(s.name))
	if err != nil {
		return fmt.Errorf("natsstore: append: %w", err)
	}
	e.Seq = ack.Sequence
	s.latest.Seen(e.Seq, e.ID)
	s.listeners.Appended(e.Seq)
	return nil
}

// isRetry tells whether e, whose update's digest is sum, is a retry of
// the message m: the latest of its id, with the same update, recorded
// within the retry window before e's time. Recorded is when the stream
// stored it, which may be long after the hub accepted it (the event's
// Time): nats.go keeps what is published while it reconnects, and sends
// it on reconnecting, after the append failed; the later of the two
// times counts, whatever the clocks of the hub and the servers.
func (s *Store) isRetry(m *rawMsg, e *store.Event, sum string) bool {
	if s.cfg.window <= 0 || m.Header.Get(digestHeader) != sum {
		return false
	}
	var got store.Event
	if err := store.UnmarshalEvent(m.Data, &got); err != nil || got.ID != e.ID {
		return false
	}
	recorded := got.Time
	if m.Time.After(recorded) {
		recorded = m.Time
	}
	return !recorded.Before(e.Time.Add(-s.cfg.window))
}

// msgGetRequest is a request of JetStream's message get API.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

// rawMsg is a message as the message get API returns it.
type rawMsg struct {
	Seq    uint64
	Header nats.Header
	Data   []byte
	Time   time.Time // when the stream stored it; zero from a direct get
}

// createStream creates the store's stream, or updates it to the store's
// settings.
func (s *Store) createStream(ctx context.Context) error {
	if _, err := s.js.CreateOrUpdateStream(ctx, s.streamConfig()); err != nil {
		return fmt.Errorf("stream %s: %w", s.name, err)
	}
	return nil
}

// getMsg asks the stream's leader for the message req names, and returns
// nil when there is none. Unlike a direct get, which any replica may
// answer, the leader's answer holds every acknowledged append. An error
// wraps [jetstream.ErrStreamNotFound] when the stream does not exist.
func (s *Store) getMsg(ctx context.Context, req msgGetRequest) (*rawMsg, error) {
	return s.getMsgFrom(ctx, s.name, req)
}

// getMsgFrom is getMsg on the stream name.
func (s *Store) getMsgFrom(ctx context.Context, name string, req msgGetRequest) (*rawMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	reply, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+name, body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *struct {
			Seq    uint64    `json:"seq"`
			Header []byte    `json:"hdrs"`
			Data   []byte    `json:"data"`
			Time   time.Time `json:"time"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("message get: %w", err)
	}
	if resp.Error != nil {
		switch resp.Error.ErrCode {
		case int(jetstream.JSErrCodeMessageNotFound):
			return nil, nil
		case int(jetstream.JSErrCodeStreamNotFound):
			return nil, fmt.Errorf("message get: %w", jetstream.ErrStreamNotFound)
		}
		return nil, fmt.Errorf("message get: %s (%d)", resp.Error.Description, resp.Error.ErrCode)
	}
	if resp.Message == nil {
		return nil, errors.New("message get: empty reply")
	}
	m := &rawMsg{Seq: resp.Message.Seq, Data: resp.Message.Data, Time: resp.Message.Time}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = decodeHeader(resp.Message.Header); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// eventAt returns the event of the message seq, nil if there is none.
func (s *Store) eventAt(ctx context.Context, seq uint64) (*store.Event, error) {
	m, err := s.getMsg(ctx, msgGetRequest{Seq: seq})
	if err != nil || m == nil {
		return nil, err
	}
	return decode(m.Seq, m.Data)
}

// streamState is what the feed and Replay read of the stream's state.
type streamState struct {
	FirstSeq, LastSeq, Msgs uint64
	Created                 time.Time
}

// info reads the stream's state from its leader.
func (s *Store) info(ctx context.Context) (streamState, error) {
	st, err := s.js.Stream(ctx, s.name)
	if err != nil {
		return streamState{}, err
	}
	i := st.CachedInfo()
	return streamState{FirstSeq: i.State.FirstSeq, LastSeq: i.State.LastSeq, Msgs: i.State.Msgs, Created: i.Created}, nil
}

func decode(seq uint64, data []byte) (*store.Event, error) {
	e := &store.Event{Seq: seq}
	if err := store.UnmarshalEvent(data, e); err != nil {
		return nil, fmt.Errorf("natsstore: message %d: %w", seq, err)
	}
	return e, nil
}

// Replay implements [store.Store]. The cursor is resolved by the stream's
// leader, then the head (so that the cursor is not after it); events are
// then read in pages of at most 512 and about 1 MiB, up to Head.
// Retention drops the oldest messages first: a page that starts past the
// message it asked for, before Head, lost events to it, and Events ends
// with an error wrapping [store.ErrHistoryGap].
func (s *Store) Replay(ctx context.Context, lastEventID string) (store.Backlog, error) {
	if s.closed() {
		return store.Backlog{}, ErrClosed
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	var cursor uint64
	if lastEventID != store.Earliest {
		// Whether a rewind lost the id is asked meanwhile: a replay
		// takes as many round trips as before there was such a thing.
		type answer struct {
			gone bool
			err  error
		}
		vanished := make(chan answer, 1)
		go func() {
			gone, err := s.vanished(cctx, lastEventID)
			vanished <- answer{gone, err}
		}()
		m, err := s.getMsg(cctx, msgGetRequest{Seq: 1, NextFor: s.idSubject(lastEventID)})
		v := <-vanished
		if err == nil {
			err = v.err
		}
		if err != nil {
			return store.Backlog{}, fmt.Errorf("natsstore: replay: %w", err)
		}
		if v.gone {
			m = nil // an unknown cursor
		}
		if m != nil {
			if e, err := decode(m.Seq, m.Data); err == nil && e.ID == lastEventID {
				cursor = m.Seq
			}
		}
	}
	st, err := s.info(cctx)
	if err != nil {
		return store.Backlog{}, fmt.Errorf("natsstore: replay: %w", err)
	}
	b := store.Backlog{Cursor: store.Earliest, Head: st.LastSeq}
	if st.Msgs == 0 || st.LastSeq == 0 {
		b.Head = st.LastSeq
		b.Events = func(func(*store.Event, error) bool) {}
		return b, nil
	}
	r := replayer{s: s, ctx: ctx, head: st.LastSeq, next: st.FirstSeq}
	if cursor != 0 {
		b.Cursor, r.next = lastEventID, cursor+1
	}
	b.Events = r.events
	return b, nil
}

// vanishedTTL is how long the ids of events that a rewound history lost
// stay unknown cursors: far longer than a client takes to resume.
const vanishedTTL = 24 * time.Hour

// vanishedBucket is the key-value bucket of the ids of events that a
// rewound history lost (see bury): keyed by the hash of the id, with the
// id as the value.
func (s *Store) vanishedBucket() string { return s.name + "_vanished" }

// bury records the ids of events that the history lost, after the feed
// passed them on (see verify): for [vanishedTTL], they are unknown
// cursors. A client that got one and resumes with it must not resume
// after a retry of its update that the new history recorded later, past
// updates it never got. The bucket is created here, the first time a
// history is rewound, and again if the servers lost it with the stream.
func (s *Store) bury(ctx context.Context, events []store.PassedEvent) error {
	if len(events) == 0 {
		return nil
	}
	storage := jetstream.FileStorage
	if s.cfg.memory {
		storage = jetstream.MemoryStorage
	}
	bucket := s.vanishedBucket()
	if _, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: bucket, Description: "Mercure hub: ids of updates a rewound history lost (natsstore)",
		History: 1, TTL: vanishedTTL, Storage: storage, Replicas: s.cfg.replicas,
	}); err != nil {
		return fmt.Errorf("vanished ids bucket: %w", err)
	}
	futures := make([]jetstream.PubAckFuture, 0, len(events))
	for _, e := range events {
		f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: "$KV." + bucket + "." + hash(e.ID), Data: []byte(e.ID)})
		if err != nil {
			return fmt.Errorf("vanished ids bucket: %w", err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("vanished ids bucket: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("vanished ids bucket: %w", ctx.Err())
		}
	}
	return nil
}

// vanished tells whether a rewound history lost an event with id, in
// the last [vanishedTTL] (see bury).
func (s *Store) vanished(ctx context.Context, id string) (bool, error) {
	bucket := s.vanishedBucket()
	m, err := s.getMsgFrom(ctx, "KV_"+bucket, msgGetRequest{LastFor: "$KV." + bucket + "." + hash(id)})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil // no history was rewound
	}
	if err != nil {
		return false, fmt.Errorf("vanished ids: %w", err)
	}
	return m != nil && string(m.Data) == id, nil
}

// replayer reads a backlog from the stream. Its events method works on
// a copy, so that every range over Events starts afresh.
type replayer struct {
	s    *Store
	ctx  context.Context
	head uint64 // the last message to read
	next uint64 // the next message to yield
}

func (r replayer) events(yield func(*store.Event, error) bool) {
	for r.next <= r.head {
		msgs, err := r.s.page(r.ctx, r.next, r.head)
		if err != nil {
			yield(nil, fmt.Errorf("natsstore: replay: %w", err))
			return
		}
		for _, m := range msgs {
			if m.Seq != r.next {
				yield(nil, fmt.Errorf("natsstore: replay at message %d: %w", r.next, store.ErrHistoryGap))
				return
			}
			r.next++
			e, err := decode(m.Seq, m.Data)
			if err != nil {
				continue // not written by a Store: skipped, as by the feed
			}
			if !yield(e, nil) {
				return
			}
		}
	}
}

// page reads the messages from from on, up to head: at most replayPage
// and about pageBytes (at least one message). A replica that lags behind
// the leader answers with fewer than it could: page asks again, within
// the store's timeout, until it has one message at least, unless the
// leader says that retention dropped them (then the first message it
// returns is past from: a gap).
func (s *Store) page(ctx context.Context, from, head uint64) ([]rawMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	n := int(min(uint64(replayPage), head-from+1))
	wait := time.Millisecond
	for {
		var out []rawMsg
		var beyond *jetstream.RawStreamMsg
		msgs, err := jetstreamext.GetBatch(ctx, s.js, s.name, n, jetstreamext.GetBatchSeq(from), jetstreamext.GetBatchMaxBytes(pageBytes))
		if err == nil {
			for m, err2 := range msgs {
				if err2 != nil {
					if !errors.Is(err2, jetstreamext.ErrNoMessages) {
						err = err2
					}
					break
				}
				if m.Sequence > head {
					beyond = m
					break
				}
				out = append(out, rawMsg{Seq: m.Sequence, Header: m.Header, Data: m.Data})
			}
		}
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			return out, nil
		}
		if beyond != nil {
			// Retention dropped every message up to head.
			return []rawMsg{{Seq: beyond.Sequence}}, nil
		}
		// Nothing from from to head: retention dropped them all (the
		// leader's state says so), or a replica behind the leader
		// answered, which catches up soon.
		st, err := s.info(ctx)
		if err != nil {
			return nil, err
		}
		if st.FirstSeq > from || st.Msgs == 0 {
			return []rawMsg{{Seq: max(st.FirstSeq, from+1)}}, nil // a gap from from on
		}
		select {
		case <-time.After(wait):
			wait = min(2*wait, 100*time.Millisecond)
		case <-ctx.Done():
			return nil, fmt.Errorf("no message from %d to %d: %w", from, head, ctx.Err())
		}
	}
}

// decodeHeader parses a NATS header block ("NATS/1.0" and MIME lines),
// as the message get API returns it.
func decodeHeader(b []byte) (nats.Header, error) {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(b)))
	if _, err := r.ReadLine(); err != nil { // NATS/1.0, maybe a status
		return nil, fmt.Errorf("message header: %w", err)
	}
	h, err := r.ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("message header: %w", err)
	}
	return nats.Header(h), nil
}
