// Package pgstore is a [store.Store] on PostgreSQL, shared by every hub
// (in any number of processes) that uses the same database and table
// prefix, and able to record an update inside the application's own
// transaction (see [Store.PublishTx]): the update is delivered if and only
// if the transaction commits, once, after the commit. It needs PostgreSQL
// 13 or later and the pgx driver (a [pgxpool.Pool]).
//
// # Layout
//
// New creates the tables it needs, or migrates them, and records their
// version in the table prefix+"_schema" (see [SchemaVersion]); with
// [WithoutMigrations], the application runs the statements of
// [Migrations] itself, and New only checks the version. Events are rows
// of prefix+"_events": an insert id (bigserial), the delivery position
// seq, the update id, the event's JSON, its time, its size and the
// SHA-256 of its update without its time. A cursor resolves by the index
// on (update_id, seq) to the oldest retained occurrence of its id
// (REC-7).
//
// # Isolation
//
// Every statement of the store reads committed data (READ COMMITTED),
// whatever the default isolation level of the database or role
// (default_transaction_isolation, which an operator may raise to
// REPEATABLE READ or SERIALIZABLE): the sequencer reads its counter after
// taking its lock, which under a stricter level it would read in a
// snapshot taken before. The feed's connection is set so once; a
// statement on the application's pool is sent between BEGIN ISOLATION
// LEVEL READ COMMITTED and COMMIT, in one round trip. [Store.PublishTx]
// works in a transaction of any level (see there).
//
// # Order under concurrency
//
// An insert id is taken when a row is inserted, but the row becomes
// visible only when its transaction commits, maybe after rows with larger
// ids: a reader that followed insert ids would pass over a row committed
// late, and never see it. So events are not read by insert id. Their
// delivery position, seq, is given after commit, by a sequencer: the
// function prefix+"_sequence" takes an advisory lock, stamps the committed
// rows without a seq, in insert id order, with the next numbers of a
// counter (prefix+"_meta"), and commits. Callers hold the lock in turn
// and each reads a snapshot taken after the previous one committed, so
// the stamped rows are always a prefix of the sequence 1, 2, 3, … with no
// hole: a reader that reads by seq never passes a position that is filled
// later. A transaction held open across other commits is stamped after
// them, when it commits: live subscribers and later replays see it at
// that same position. A rolled-back row is never visible, never stamped.
//
// A store's appends go through one goroutine of its own, which records
// every append waiting with one statement (a group commit): the function
// prefix+"_append2" takes the same lock, stamps the committed rows without
// a seq as a round does, then inserts the batch with the next numbers, so
// that each event is written once, already in its place. Appends arriving
// meanwhile make the next batch (which waits up to 300 µs to gather as
// many as the one before), the lock is held for one short statement and
// its commit, and appends never queue on it; an acknowledged append is
// durable, at the cost of one fsync per batch. Rows inserted by
// [Store.PublishTx] are stamped by rounds: each store's feed runs one
// when the NOTIFY that PublishTx sends on commit arrives, and on every
// poll (see [WithPollInterval]), so that a lost notification delays an
// event, never loses it. Each round that stamps rows sends one NOTIFY; every store's
// feed then reads the rows after the last seq it delivered. Since seqs
// have no hole, a feed or a replay that finds a row missing knows it was
// deleted by retention: the feed calls Listener.Gap, a replay ends with
// [store.ErrHistoryGap].
//
// The feed and replays read pages of at most 512 events and about 1 MiB
// (at least one event): a page's running size is summed from the sizes
// alone, and only the page's bodies are read, so that a reader of a
// history of large updates holds, and makes the database read, a page of
// them at a time.
//
// # Retries
//
// The append function takes an event for a retry when the latest event
// with its id, numbered already, has the same digest and was recorded at
// most the retry window before it (see [WithRetryWindow] and
// [store.Store.Append]): it inserts nothing, and the append gets that
// event's seq. The check runs under the sequencer's lock, so that two
// hubs given the same update at once record it once; the sequencer merges
// the same update appended twice in one batch. A publish whose answer was
// lost (its commit went through) and that the publisher sends again is
// thus recorded once.
//
// # Retention
//
// The sequencer round that stamps events also deletes the oldest ones
// once there are more than [WithMaxEvents], with a slack of 1/64 (at
// most 100), so that deletions come in batches, at most 1000 at once:
// retention is done in the transaction that extends the sequence, and
// over by the time Append returns. Each store's feed deletes the events
// older than [WithMaxAge], at most once a second and 1000 at once.
// Deletion always takes a prefix of the sequence: an event newer than
// the age limit goes too if an older one follows it. Stores sharing
// tables should share these options.
//
// # Outages
//
// Every call to PostgreSQL is bounded by [WithTimeout]: Append fails
// rather than hang while the database is away (the hub answers 503).
// Append ignores its context's cancellation (it carries values only): an
// update accepted is recorded unless the database fails. An Append that
// fails may still have recorded its event (its commit went through but
// the reply was lost, or the sequencing failed): it is then delivered
// later, once, and the same update sent again is taken for a retry. The
// feed reports an outage to its listeners and resumes after the last
// event it delivered.
//
// # Failover
//
// With a primary and standbys (streaming replication), give the pool a
// DSN that names them all and connects to the one that accepts writes:
// postgres://user@primary,standby/db?target_session_attrs=read-write.
// When the primary fails and a standby is promoted, the store's calls
// fail until then (the hub answers 503; publishers retry), and the feed
// reports the outage and connects to the new primary on its own.
//
// Asynchronous replication, PostgreSQL's default, may promote a standby
// that lacks the last events: acknowledged by Append, maybe passed on by
// the feed, they are lost, and their seqs go to the next events. Once
// connected, before it reads, the feed checks with one statement that the
// history still holds the last event it passed on, at its seq, with its
// id and time. When it does not (the counter is behind, or the seq holds
// another event), the feed calls Listener.Rewound with the new primary's
// last event, before any event of the new history, and goes on after it:
// the hubs end their streams, whose clients resume from history, and
// LatestID goes back. A Last-Event-ID naming a lost event is unknown, and
// replays the whole history; so is, for a day, the id of an event the
// feed passed on (among its last [store.PassedCap]) that the new history
// lacks, even once a publisher's retry recorded the same update again
// (the table prefix+"_vanished"): a client that got it must not resume
// after the retry, past updates it never got. A database restored from a backup is found
// the same way, also while the feed stays connected: the sequencer's
// notification then announces a counter below the one before. Each store
// writes its shared subscriptions again once its feed is back, since the
// new primary may lack the latest.
//
// With [WithSynchronousReplication] and a synchronous standby
// (synchronous_standby_names), an append is acknowledged, and visible to
// the feeds, only once the standby has it (PostgreSQL shows a commit to
// other sessions once its synchronous wait ends): a failover to that
// standby loses no acknowledged event, and the feed goes on without a
// rewind. The option raises synchronous_commit to on for the store's
// transactions that record or number events, over a database's or
// role's default of off, local or remote_write; without it, the store
// leaves synchronous_commit as the server sets it (with synchronous
// standbys named and the default, on, appends wait for them already).
// Caveats:
//
//   - An Append that times out waiting for the standby has committed
//     locally already: pgx cancels the statement, and PostgreSQL cancels
//     the wait, not the commit, which other sessions then see. The event
//     is delivered, though the standby may lack it: a failover then loses
//     it, and the feed reports a rewind. The same update sent again is
//     taken for a retry, acknowledged once the standby has it.
//   - While no synchronous standby answers, every append waits for the
//     timeout and fails, its event recorded all the same (see above).
//     Name several standbys (ANY 1 (s1, s2)) to survive the loss of one.
//   - New checks synchronous_standby_names once: a promoted standby must
//     name synchronous standbys of its own, or appends are acknowledged
//     without.
//   - [Store.PublishTx] records in the application's transaction, which
//     commits with the application's synchronous_commit: it must be on
//     (or remote_apply) for those updates to survive a failover.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure"
)

var (
	// ErrClosed is returned by the store's methods once it is closed.
	ErrClosed = errors.New("pgstore: store closed")
	// ErrSchema is returned by New when the tables were written by a
	// later version of this package.
	ErrSchema = errors.New("pgstore: unknown schema version")
	// ErrNoSynchronousStandby is returned by New, with
	// [WithSynchronousReplication], when the server names no synchronous
	// standby (its synchronous_standby_names is empty): the option would
	// promise what the server does not do.
	ErrNoSynchronousStandby = errors.New("pgstore: the server has no synchronous standby")
)

const (
	// DefaultTimeout bounds each call to PostgreSQL (see [WithTimeout]).
	DefaultTimeout = 5 * time.Second
	// DefaultMaxEvents is how many events a store keeps unless
	// [WithMaxEvents] says otherwise.
	DefaultMaxEvents = 100_000
	// DefaultPollInterval is how often an idle feed looks for events
	// whose notification it missed (see [WithPollInterval]).
	DefaultPollInterval = time.Second
	// DefaultPrefix names the tables unless [WithPrefix] says otherwise.
	DefaultPrefix = "mercure"

	page       = 512     // rows per read of the feed and of a replay
	pageBytes  = 1 << 20 // bytes of events per read, past the first
	sweepBatch = 100     // expired stores' rows deleted per statement
	seqBatch   = 4096    // rows stamped per sequencer round
	pruneBatch = 1000    // rows deleted per statement
	// The feed reconnects after minBackoff, doubling up to maxBackoff,
	// and after minBackoff again once it worked. The hub refuses to
	// publish while the feed is down (an update recorded then would not
	// be delivered live), so the feed comes back soon after the server:
	// within maxBackoff, not after a long wait that only refuses
	// publishes for longer.
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
)

// An Option configures [New]. Options return an error wrapping
// [mercure.ErrInvalidOption] for a value they refuse.
type Option func(*config) error

type config struct {
	prefix    string
	maxEvents int64
	maxAge    time.Duration
	timeout   time.Duration
	poll      time.Duration
	subTTL    time.Duration
	window    time.Duration
	validate  func(mercure.Update) error // nil: the attached hub's
	noMigrate bool
	syncRep   bool
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: pgstore: "+format, append([]any{mercure.ErrInvalidOption}, args...)...)
}

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// WithPrefix names the store's tables, functions and channels
// prefix+"_events" and so on: stores with the same prefix on the same
// database are one hub. It must be a lowercase SQL identifier of at most
// 40 characters; it may be qualified by no schema (set the connection's
// search_path instead). The default is [DefaultPrefix].
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if !prefixRE.MatchString(prefix) {
			return invalid("table prefix %q is not a lowercase identifier of at most 40 characters", prefix)
		}
		c.prefix = prefix
		return nil
	}
}

// WithMaxEvents keeps about the n latest events, at least n (see the
// package documentation); 0 means no limit. The default is
// [DefaultMaxEvents].
func WithMaxEvents(n int64) Option {
	return func(c *config) error {
		if n < 0 {
			return invalid("negative max events %d", n)
		}
		c.maxEvents = n
		return nil
	}
}

// WithMaxAge drops the events older than d (see the package
// documentation); 0, the default, means no limit by age.
func WithMaxAge(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return invalid("negative max age %v", d)
		}
		c.maxAge = d
		return nil
	}
}

// WithTimeout bounds each call the store makes to PostgreSQL (an append,
// the start of a replay, one page of a replay, one read of the feed, a
// write of the shared subscriptions). The default is [DefaultTimeout].
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("timeout %v is not positive", d)
		}
		c.timeout = d
		return nil
	}
}

// WithPollInterval sets how often the feed looks for events without
// having been notified: the longest delay a lost notification causes.
// The default is [DefaultPollInterval].
func WithPollInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("poll interval %v is not positive", d)
		}
		c.poll = d
		return nil
	}
}

// WithValidator sets the check [Store.PublishTx] applies to an update
// before recording it. By default, it is that of the hub using the store
// (the rules of mercure.Hub.Publish, with its limits, reserved namespace and
// whether it can authorize readers of a private update: [mercure.New]
// attaches the hub to the store), and [mercure.ValidateUpdate] while no
// hub is attached (a process that records updates for hubs that run
// elsewhere).
func WithValidator(f func(mercure.Update) error) Option {
	return func(c *config) error {
		if f == nil {
			return invalid("nil validator")
		}
		c.validate = f
		return nil
	}
}

// WithRetryWindow sets how long after an update was recorded the same
// update appended again is taken for a retry and not recorded twice (see
// [store.Store.Append]); 0 records every append. The default is
// [store.DefaultRetryWindow]. Stores sharing tables should share it.
func WithRetryWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return invalid("negative retry window %v", d)
		}
		c.window = d
		return nil
	}
}

// WithoutMigrations leaves the tables to the application's own
// migrations: New neither creates nor migrates them, and fails with
// [ErrSchema] unless they are at [SchemaVersion]. [Migrations] returns the
// statements to run.
func WithoutMigrations() Option {
	return func(c *config) error {
		c.noMigrate = true
		return nil
	}
}

// WithSynchronousReplication acknowledges an update only once a
// synchronous standby of the server has it, so that a failover to that
// standby loses no update that Append accepted (see the package
// documentation). The store's transactions that record or number events
// commit with synchronous_commit on, whatever the database's or role's
// default (an operator's remote_apply stays). New fails with
// [ErrNoSynchronousStandby] unless the server names synchronous standbys
// (synchronous_standby_names). While none answers, appends wait, and
// fail at the timeout (see [WithTimeout]), their events recorded all the
// same: PostgreSQL cancels the wait, not the commit.
func WithSynchronousReplication() Option {
	return func(c *config) error {
		c.syncRep = true
		return nil
	}
}

// The store's interfaces, checked by the compiler: the hub finds the
// optional ones by a type assertion, which would otherwise fail silently.
var (
	_ store.LatestStore       = (*Store)(nil)
	_ store.SubscriptionStore = (*Store)(nil)
	_ store.OutboxStore       = (*Store)(nil)
)

// Store is a [store.Store] on PostgreSQL. The zero value is not usable;
// call [New].
type Store struct {
	pool *pgxpool.Pool
	cfg  config
	n    *names

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	latest store.Latest

	listeners store.Fanout

	presence presence
	seq      sequencer

	hubs struct {
		sync.Mutex
		links []*store.HubLink // attached hubs, the latest last
	}
}

// New returns a store on pool's database, creating or migrating its
// tables (unless [WithoutMigrations]). Listeners receive every event
// sequenced after New returns, by any hub sharing the tables. Close stops
// the store; the pool stays open (the store holds one of its connections
// for its feed while it runs).
//
// New fails when the database cannot be reached within the timeout, with
// [ErrSchema] for tables of a later version (or, with
// [WithoutMigrations], of another version or missing), with
// [ErrNoSynchronousStandby] for [WithSynchronousReplication] on a server
// without synchronous standbys, and with an error wrapping
// [mercure.ErrInvalidOption] for a bad option.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	cfg := config{
		prefix: DefaultPrefix, maxEvents: DefaultMaxEvents, timeout: DefaultTimeout,
		poll: DefaultPollInterval, subTTL: DefaultSubscriptionTTL, window: store.DefaultRetryWindow,
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if pool == nil {
		return nil, invalid("nil pool")
	}
	s := &Store{pool: pool, cfg: cfg, n: newNames(cfg.prefix)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.presence.init(s)
	s.seq.init(s)
	tctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	prepare := migrate
	if cfg.noMigrate {
		prepare = checkSchema
	}
	if err := prepare(tctx, pool, s.n); err != nil {
		s.cancel()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	var last int64
	var id string
	var at *time.Time
	var standbys bool
	err := s.query(tctx, s.n.latest, nil, func(rows pgx.Rows) error {
		if !rows.Next() {
			return pgx.ErrNoRows
		}
		return rows.Scan(&last, &id, &at, &standbys)
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if cfg.syncRep && !standbys {
		s.cancel()
		return nil, fmt.Errorf("%w: its synchronous_standby_names is empty", ErrNoSynchronousStandby)
	}
	st := &feedState{last: uint64(last), id: id}
	if at != nil {
		st.at = *at
		s.latest.Seen(uint64(last), id)
	}
	s.wg.Add(2)
	go s.feed(st)
	go s.seq.run()
	return s, nil
}

// Close stops the feed and withdraws this store's subscriptions from the
// shared list. It does not close the pool. It returns once the store's
// goroutines have ended; a query they had under way is abandoned: pgx,
// by default, closes its connection at once, and the server goes on with
// the query, holding its locks, until it next writes to the client (a
// DROP of the tables right after Close can meet them, and deadlock).
func (s *Store) Close() error {
	s.once.Do(func() {
		s.presence.mu.Lock() // no writer starts after this
		s.cancel()
		s.presence.mu.Unlock()
		s.wg.Wait()
		s.presence.withdraw()
	})
	return nil
}

func (s *Store) closed() bool { return s.ctx.Err() != nil }

// LatestID returns the id of the latest event this Store has appended or
// read from its feed, including the latest one in the table when New was
// called; [store.Earliest] if none. It implements [store.LatestStore]
// and never blocks.
func (s *Store) LatestID() string {
	return s.latest.ID()
}

// timeout returns ctx without its cancellation, bounded by the store's
// timeout: the store's calls outlive a caller that gives up, but not a
// database that does not answer.
func (s *Store) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.cfg.timeout)
}

// Append implements [store.Store]: the store's sequencer inserts the
// event (with the other appends waiting), commits, and gets its seq,
// which Append sets as e.Seq; or it finds the event a retry of the latest
// one with its id, and sets that one's. Listeners get the event from the
// feed, after Append returns or about then. ctx's cancellation is ignored
// (see the package doc).
func (s *Store) Append(ctx context.Context, e *store.Event) error {
	if s.closed() {
		return ErrClosed
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	body, digest, err := store.MarshalEvent(e)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	seq, err := s.seq.append(ctx, e.ID, body, digest, e.Time)
	if err != nil {
		return fmt.Errorf("pgstore: append: %w", err)
	}
	e.Seq = seq
	s.latest.Seen(e.Seq, e.ID)
	s.listeners.Appended(e.Seq)
	return nil
}

// Replay implements [store.Store]. Head and the cursor are resolved in
// one statement; events are then read in pages of at most 512 and about
// 1 MiB (see the package documentation), up to Head. Since
// seqs have no hole, a page that does not start right after the last
// event passed (or, from Earliest, at the first event retained when the
// replay began) reveals events deleted under the replay: Events then
// ends with an error wrapping [store.ErrHistoryGap].
func (s *Store) Replay(ctx context.Context, lastEventID string) (store.Backlog, error) {
	if s.closed() {
		return store.Backlog{}, ErrClosed
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	var head int64
	var cursor, first *int64
	arg := lastEventID
	if arg == store.Earliest {
		arg = ""
	}
	err := s.query(tctx, s.n.replayStart, []any{arg}, func(rows pgx.Rows) error {
		if !rows.Next() {
			return pgx.ErrNoRows
		}
		return rows.Scan(&head, &cursor, &first)
	})
	if err != nil {
		return store.Backlog{}, fmt.Errorf("pgstore: replay: %w", err)
	}
	b := store.Backlog{Cursor: store.Earliest, Head: uint64(head)}
	r := replayer{s: s, ctx: ctx, head: uint64(head)}
	switch {
	case cursor != nil:
		b.Cursor, r.pos = lastEventID, uint64(*cursor)
	case first != nil:
		r.pos = uint64(*first) - 1
	default:
		r.pos = uint64(head) // nothing retained
	}
	b.Events = r.events
	return b, nil
}

// replayer reads a backlog. Its events method works on a copy, so that
// every range over Events starts afresh.
type replayer struct {
	s         *Store
	ctx       context.Context
	pos, head uint64 // the last seq passed, and the last to read
}

func (r replayer) events(yield func(*store.Event, error) bool) {
	for r.pos < r.head {
		evs, _, err := r.s.read(r.ctx, r.s.poolQuery, r.pos, r.head)
		if err != nil {
			yield(nil, fmt.Errorf("pgstore: replay: %w", err))
			return
		}
		if len(evs) == 0 || evs[0].Seq != r.pos+1 {
			yield(nil, fmt.Errorf("pgstore: replay after seq %d: %w", r.pos, store.ErrHistoryGap))
			return
		}
		// Retention deletes the oldest rows first, and a page is read
		// in one snapshot: a hole inside a page is a row someone deleted
		// by hand, passed over.
		for _, e := range evs {
			r.pos = e.Seq
			if !yield(e, nil) {
				return
			}
		}
	}
}

// marshal returns the JSON that a row holds of e, and the digest of its
// update.
func marshal(e *store.Event) ([]byte, [32]byte, error) {
	b, d, err := store.MarshalEvent(e)
	if err != nil {
		return nil, d, fmt.Errorf("pgstore: %w", err)
	}
	return b, d, nil
}

// A querier runs a statement and passes its rows to scan: on the pool
// (poolQuery), or on the feed's connection (connQuery).
type querier func(ctx context.Context, sql string, args []any, scan func(pgx.Rows) error) error

func (s *Store) poolQuery(ctx context.Context, sql string, args []any, scan func(pgx.Rows) error) error {
	return s.query(ctx, sql, args, scan)
}

func connQuery(conn *pgx.Conn) querier {
	return func(ctx context.Context, sql string, args []any, scan func(pgx.Rows) error) error {
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := scan(rows); err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
}

// read reads a page (see names.page) of the events after seq after, up
// to head, with the store's timeout. full tells whether it stopped at a
// bound, so that more events may follow.
func (s *Store) read(ctx context.Context, q querier, after, head uint64) (evs []*store.Event, full bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	var run int64
	err = q(ctx, s.n.page, []any{int64(after), int64(min(head, math.MaxInt64)), page, pageBytes}, func(rows pgx.Rows) error {
		for rows.Next() {
			var seq int64
			var body []byte
			if err := rows.Scan(&seq, &body, &run); err != nil {
				return err
			}
			e := &store.Event{Seq: uint64(seq)}
			if err := store.UnmarshalEvent(body, e); err != nil {
				return fmt.Errorf("event at seq %d: %w", seq, err)
			}
			evs = append(evs, e)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return evs, len(evs) == page || run >= pageBytes, nil
}

// Listen implements [store.Store]. l's functions are called from the
// store's feed goroutine: l.Event one event at a time in Seq order,
// l.Status when the feed loses the database and when it is back,
// l.Rewound when the history lost events the feed passed on (see the
// package documentation, Failover). Events this Store appended before
// Listen was called are not passed to l.Event. A listener added during
// an outage is told at once.
func (s *Store) Listen(ml store.Listener) (cancel func()) {
	return s.listeners.Add(ml)
}

// feedState is what the feed keeps across its steps and connections.
type feedState struct {
	// last is the seq of the last event passed on (at first, of the
	// latest event when the store started); id and at are that event's
	// (at is zero when the history did not hold it, or held no time for
	// it): once connected, the feed checks that the history still holds
	// it (see resync).
	last uint64
	id   string
	at   time.Time
	// notified is the counter the sequencer's latest notification on
	// this connection announced (see notice).
	notified    uint64
	aged, swept time.Time // when the feed last pruned by age, swept expired subscriptions
	sequence    bool      // run a sequencer round before the next read
	check       bool      // check the history (see resync) before the next read
	recent      store.Passed
}

// passed records the event seq with id and time at as the last passed.
func (st *feedState) passed(seq uint64, id string, at time.Time) {
	st.last, st.id, st.at = seq, id, at
}

// feed passes to the listeners the events after st.last, woken by the
// sequencer's NOTIFY, and runs the sequencer itself when PublishTx's
// NOTIFY arrives and on every poll. On errors it reconnects with backoff;
// once connected, it checks that the history still holds the last event
// it passed on (see resync), and resumes after it.
func (s *Store) feed(st *feedState) {
	defer s.wg.Done()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	backoff := minBackoff
	connected := false // the feed has been connected before
	for !s.closed() {
		var err error
		if conn == nil {
			if conn, err = s.listenConn(); err == nil {
				// Notifications were missed, and the server may be
				// another: a standby promoted, or one restored.
				st.sequence, st.check = true, true
				if connected {
					// The pool's connections may lead to the server the
					// feed lost: a primary whose postmaster died keeps
					// its backends a moment, and a write through one of
					// them commits on a server that a standby replaced.
					// The pool connects again, to the feed's server.
					s.pool.Reset()
					s.presence.reconnected()
				}
				connected = true
			}
		}
		if err == nil && st.check {
			err = s.resync(conn, st)
		}
		if err == nil {
			err = s.step(conn, st)
		}
		if err == nil {
			backoff = minBackoff
			continue
		}
		if conn != nil {
			conn.Close(context.Background())
			conn = nil
		}
		if s.closed() {
			return
		}
		s.listeners.Status(err)
		select {
		case <-time.After(backoff):
		case <-s.ctx.Done():
			return
		}
		backoff = nextBackoff(backoff)
	}
}

// nextBackoff is the feed's wait after another failure.
func nextBackoff(d time.Duration) time.Duration { return min(2*d, maxBackoff) }

// listenConn takes a connection out of the pool for the feed, listening
// to the store's channels.
func (s *Store) listenConn() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	set := setReadCommitted
	if s.cfg.syncRep {
		set += `; ` + syncCommitSession
	}
	if _, err := pc.Exec(ctx, set+`; LISTEN `+s.n.channel+`; LISTEN `+s.n.txChannel); err != nil {
		pc.Release()
		return nil, err
	}
	return pc.Hijack(), nil
}

// step sequences what is pending, delivers what follows st.last, prunes
// and sweeps if due, and waits for a notification or the poll interval.
func (s *Store) step(conn *pgx.Conn, st *feedState) error {
	if st.sequence {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
		_, err := conn.Exec(ctx, s.n.sequence, seqBatch, s.cfg.maxEvents)
		cancel()
		if err != nil {
			return err
		}
		st.sequence = false
	}
	woken := false // notifications arrived with the pages
	for {
		evs, full, err := s.read(s.ctx, connQuery(conn), st.last, math.MaxInt64)
		if err != nil {
			return err
		}
		// A notification that came with the page and shows the counter
		// gone back makes the page suspect: the feed checks the history
		// before it passes anything.
		woken = s.notifications(conn, st) || woken
		if st.check {
			return nil
		}
		s.listeners.Status(nil)
		s.deliver(evs, st)
		if !full {
			break
		}
	}
	if err := s.prune(conn, &st.aged); err != nil {
		return err
	}
	if err := s.sweep(conn, &st.swept); err != nil {
		return err
	}
	if woken {
		return nil // those notifications may be of events after the pages
	}
	// Wait for a notification, then take those already received too.
	// The sequencer's own notifications call for a read only; those of
	// PublishTx's commits, and the polls, for a sequencer round first.
	wctx, cancel := context.WithTimeout(s.ctx, s.cfg.poll)
	nf, err := conn.WaitForNotification(wctx)
	cancel()
	switch {
	case err == nil:
	case s.closed():
		return nil
	case wctx.Err() != nil:
		st.sequence = true // the poll interval passed
		return nil
	default:
		return err
	}
	s.notice(nf, st)
	s.notifications(conn, st)
	return nil
}

// alreadyDone is a context already done: WaitForNotification, given
// it, returns the notifications its connection has received, then the
// context's error, without waiting.
var alreadyDone = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// notifications takes the notifications conn has received, without
// waiting, and reports whether there were any.
func (s *Store) notifications(conn *pgx.Conn, st *feedState) bool {
	some := false
	for nf, _ := conn.WaitForNotification(alreadyDone); nf != nil; nf, _ = conn.WaitForNotification(alreadyDone) {
		s.notice(nf, st)
		some = true
	}
	return some
}

// notice takes a notification. PublishTx's call for a sequencer round.
// The sequencer's carry its counter, which never goes back unless the
// history did (a database restored under the feed): its rounds commit
// one at a time, under its lock, and notifications arrive in commit
// order. One that does sets off a check of the history. (A check resets
// the comparison: notifications of commits before it may still arrive.)
func (s *Store) notice(nf *pgconn.Notification, st *feedState) {
	switch nf.Channel {
	case s.n.txChannel:
		st.sequence = true
	case s.n.channel:
		n, err := strconv.ParseUint(nf.Payload, 10, 64)
		if err != nil {
			return
		}
		if n < st.notified {
			st.check = true
		}
		st.notified = n
	}
}

// resync checks, with one statement, that the history still holds the
// last event the feed passed on: at the same seq, with the same id and
// time. The feed runs it once connected, before it reads, and when a
// notification shows the counter gone back. If the event is there, or
// gone with the counter at or past it (retention deleted it, and the
// next read reports the gap), the feed goes on. Otherwise the history
// was rewound: the counter is behind the event, or its seq holds
// another one (a standby promoted without the latest events, which then
// numbered new ones from where it stood; a database restored). The feed
// then tells the listeners where the history ends now (see
// [store.Listener].Rewound), before any event of it, and goes on after
// that.
func (s *Store) resync(conn *pgx.Conn, st *feedState) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	var when any // null: compare the id alone
	if !st.at.IsZero() {
		when = st.at
	}
	var head int64
	var id string
	var at *time.Time
	var same *bool // null: no row at st.last
	if err := conn.QueryRow(ctx, s.n.resync, int64(st.last), st.id, when).Scan(&head, &id, &at, &same); err != nil {
		return err
	}
	st.check, st.notified = false, 0
	if uint64(head) >= st.last && (same == nil || *same) {
		return nil
	}
	var t time.Time
	latest := id
	if at != nil {
		t = *at
	} else {
		latest = store.Earliest // empty, or its latest event not retained
	}
	if err := s.bury(ctx, conn, &st.recent); err != nil {
		return err
	}
	s.latest.Rewind(uint64(head), latest)
	s.listeners.Rewind(uint64(head), latest)
	st.passed(uint64(head), id, t)
	return nil
}

// bury records, before any stream ends for a rewind, the ids of the
// events the feed passed on that the history no longer holds at their
// seq (see [store.Passed]): from then on, for a day, they are unknown
// cursors. It then forgets them all: the history they were checked
// against is gone.
func (s *Store) bury(ctx context.Context, conn *pgx.Conn, recent *store.Passed) error {
	passed := recent.After(0)
	if len(passed) == 0 {
		return nil
	}
	seqs := make([]int64, len(passed))
	for i, e := range passed {
		seqs[i] = int64(e.Seq)
	}
	type row struct {
		id string
		at time.Time
	}
	held := make(map[uint64]row, len(passed))
	rows, err := conn.Query(ctx, s.n.held, seqs)
	if err != nil {
		return err
	}
	for rows.Next() {
		var seq int64
		var r row
		if err := rows.Scan(&seq, &r.id, &r.at); err != nil {
			rows.Close()
			return err
		}
		held[uint64(seq)] = r
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var gone []string
	for _, e := range passed {
		r, ok := held[e.Seq]
		// Times as resync compares them: microseconds, maybe rounded.
		if !ok || r.id != e.ID || r.at.Sub(e.Time).Abs() > time.Microsecond {
			gone = append(gone, e.ID)
		}
	}
	if len(gone) > 0 {
		if _, err := conn.Exec(ctx, s.n.bury, gone); err != nil {
			return err
		}
	}
	recent.Forget(0)
	return nil
}

// deliver passes evs to the listeners, telling them first of a gap
// before any event that does not follow the previous one.
func (s *Store) deliver(evs []*store.Event, st *feedState) {
	for _, e := range evs {
		if e.Seq != st.last+1 {
			s.listeners.Gap()
		}
		st.passed(e.Seq, e.ID, e.Time)
		st.recent.Add(e.Seq, e.ID, e.Time)
		s.latest.Seen(e.Seq, e.ID)
		s.listeners.Deliver(e)
	}
}

// prune deletes the events older than the maximum age, at most once a
// second (retention by count is the sequencer's).
func (s *Store) prune(conn *pgx.Conn, aged *time.Time) error {
	if s.cfg.maxAge == 0 || time.Since(*aged) < time.Second {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	var cut int64
	if err := conn.QueryRow(ctx, s.n.pruneAge, s.cfg.maxAge.Seconds(), pruneBatch).Scan(&cut); err != nil {
		return err
	}
	if cut > 0 {
		if _, err := conn.Exec(ctx, s.n.prune, cut, pruneBatch); err != nil {
			return err
		}
	}
	*aged = time.Now()
	return nil
}
