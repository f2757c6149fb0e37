// Package boltstore is a durable, single-process [store.Store] kept in a
// bbolt file.
//
// Layout: bucket "events" maps the big-endian Seq to the encoded event;
// bucket "ids" maps an id to the Seq of its oldest retained occurrence
// (spec §Reconnection, State Reconciliation, and Event Sourcing), the
// number of retained occurrences and the Seq of the latest, which a retry
// is compared with (see [store.Store.Append]); bucket "meta" holds the
// Seq of the latest append, so that the sequence continues after a
// restart even when retention dropped every event. Files written before
// the latest occurrence was recorded are read as they are: an id of
// theirs reused before is not checked for retries until its older
// occurrences are dropped.
//
// Replays read the file a page at a time, each page in its own read
// transaction: at most 512 events and about 1 MiB of encoded events (at
// least one event), so that a replay holds little of a history of large
// events.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var (
	bucketEvents = []byte("events")
	bucketIDs    = []byte("ids")
	bucketMeta   = []byte("meta")
	keyLastSeq   = []byte("last-seq")
)

// ErrClosed is returned by Append and Replay once the store is closed.
var ErrClosed = errors.New("boltstore: store closed")

// maxBatch bounds the appends committed in one transaction.
const maxBatch = 1024

// Replay reads at most replayPage events, and replayPageBytes of their
// encoding (at least one event), per read transaction.
const (
	replayPage      = 512
	replayPageBytes = 1 << 20
)

// Option configures [Open]. Options validate their arguments: a bad
// value makes Open fail with an error wrapping [mercure.ErrInvalidOption].
type Option func(*config) error

type config struct {
	maxEvents int
	maxAge    time.Duration
	now       func() time.Time
	timeout   time.Duration
	window    time.Duration
}

// DefaultMaxEvents is how many events a store keeps unless [WithMaxEvents]
// says otherwise: history that any client may ask to replay (with
// Last-Event-ID: earliest) must have a bound.
const DefaultMaxEvents = 100_000

// WithMaxEvents keeps at most n events, dropping the oldest; 0 means no
// limit. The default is [DefaultMaxEvents].
func WithMaxEvents(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: boltstore.WithMaxEvents(%d) is negative", mercure.ErrInvalidOption, n)
		}
		c.maxEvents = n
		return nil
	}
}

// WithMaxAge drops events older than d (by Event.Time); 0 means no limit
// (the default). Old events are pruned on append and periodically.
func WithMaxAge(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: boltstore.WithMaxAge(%v) is negative", mercure.ErrInvalidOption, d)
		}
		c.maxAge = d
		return nil
	}
}

// WithClock sets the clock used for retention by age and for the Time of
// events appended without one. The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return fmt.Errorf("%w: boltstore.WithClock(nil)", mercure.ErrInvalidOption)
		}
		c.now = now
		return nil
	}
}

// WithRetryWindow sets how long after an update was recorded the same
// update appended again is taken for a retry and not recorded twice (see
// [store.Store.Append]); 0 records every append. The default is
// [store.DefaultRetryWindow].
func WithRetryWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: boltstore.WithRetryWindow(%v) is negative", mercure.ErrInvalidOption, d)
		}
		c.window = d
		return nil
	}
}

// WithLockTimeout sets how long Open waits for the file lock held by
// another process; 0 waits for ever. The default is 5s.
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: boltstore.WithLockTimeout(%v) is negative", mercure.ErrInvalidOption, d)
		}
		c.timeout = d
		return nil
	}
}

// The store's interfaces, checked by the compiler: the hub finds the
// optional ones by a type assertion, which would otherwise fail silently.
var _ store.LatestStore = (*Store)(nil)

// Store is a [store.Store] on a bbolt file. Appends are group-committed:
// concurrent appends share one transaction and one fsync, and each returns
// once its event is durably committed. Listeners are in-process: the store
// serves the hubs of one process.
type Store struct {
	db  *bolt.DB
	cfg config

	reqs chan *appendReq
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	lastSeq uint64                 // owned by the committer goroutine
	latest  atomic.Pointer[string] // id of the latest retained event

	lmu       sync.Mutex
	listeners map[*store.Listener]struct{}
}

type appendReq struct {
	e     *store.Event
	err   chan error
	retry bool // a retry of a recorded event: nothing written, nothing delivered
}

// Open opens or creates the store at path.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := config{maxEvents: DefaultMaxEvents, now: time.Now, timeout: 5 * time.Second, window: store.DefaultRetryWindow}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil boltstore.Option", mercure.ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: cfg.timeout})
	if err != nil {
		return nil, fmt.Errorf("boltstore: %w", err)
	}
	s := &Store{
		db:        db,
		cfg:       cfg,
		reqs:      make(chan *appendReq),
		done:      make(chan struct{}),
		listeners: make(map[*store.Listener]struct{}),
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketEvents, bucketIDs, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		s.lastSeq = lastSeq(tx)
		if err := s.prune(tx); err != nil {
			return err
		}
		if k, v := tx.Bucket(bucketEvents).Cursor().Last(); len(k) == 8 {
			e, err := decode(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			s.latest.Store(&e.ID)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("boltstore: %w", err)
	}
	s.wg.Add(1)
	go s.commitLoop()
	return s, nil
}

// lastSeq returns the Seq of the latest append recorded in tx.
func lastSeq(tx *bolt.Tx) uint64 {
	var seq uint64
	if v := tx.Bucket(bucketMeta).Get(keyLastSeq); len(v) == 8 {
		seq = binary.BigEndian.Uint64(v)
	}
	if k, _ := tx.Bucket(bucketEvents).Cursor().Last(); len(k) == 8 {
		seq = max(seq, binary.BigEndian.Uint64(k))
	}
	return seq
}

// LatestID returns the id of the latest event in the file, [store.Earliest]
// if none. It implements [store.LatestStore], so that a hub restarted on
// the file reports its last event id (spec §Reconnection, State
// Reconciliation, and Event Sourcing).
func (s *Store) LatestID() string {
	if id := s.latest.Load(); id != nil {
		return *id
	}
	return store.Earliest
}

// Close stops the store and closes the file. Appends waiting to be
// committed fail with [ErrClosed].
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		s.wg.Wait()
		err = s.db.Close()
	})
	return err
}

// Append implements [store.Store]. It returns once e is committed to
// disk, after every listener has been called with it. Like every store,
// it records e even when ctx is done: the time it takes is a group
// commit's, bounded by the disk.
func (s *Store) Append(_ context.Context, e *store.Event) error {
	r := &appendReq{e: e, err: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-s.done:
		return ErrClosed
	}
	// Once handed over, the event is committed or fails: wait for that.
	return <-r.err
}

func (s *Store) commitLoop() {
	defer s.wg.Done()
	var tick <-chan time.Time
	if s.cfg.maxAge > 0 {
		t := time.NewTicker(min(max(s.cfg.maxAge/10, time.Second), time.Minute))
		defer t.Stop()
		tick = t.C
	}
	batch := make([]*appendReq, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		case <-tick:
			_ = s.db.Update(s.prune) // retried on the next tick or append
			continue
		case <-s.done:
			return
		}
	collect:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break collect
			}
		}
		s.commit(batch)
	}
}

// commit writes batch in one transaction, then feeds listeners and
// answers the appenders.
func (s *Store) commit(batch []*appendReq) {
	seq := s.lastSeq
	latest := ""
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range batch {
			r.retry = false
			if err := s.put(tx, r, &seq); err != nil {
				return err
			}
			if !r.retry {
				latest = r.e.ID
			}
		}
		if err := tx.Bucket(bucketMeta).Put(keyLastSeq, seqKey(seq)); err != nil {
			return err
		}
		return s.prune(tx)
	})
	if err != nil {
		for _, r := range batch {
			r.e.Seq = 0
			r.err <- fmt.Errorf("boltstore: %w", err)
		}
		return
	}
	s.lastSeq = seq
	if latest != "" {
		s.latest.Store(&latest)
	}
	s.lmu.Lock()
	for _, r := range batch {
		if r.retry {
			continue
		}
		for l := range s.listeners {
			l.Event(r.e)
		}
	}
	s.lmu.Unlock()
	for _, r := range batch {
		r.err <- nil
	}
}

// put records r's event in tx with the Seq after *seq, or, when it is a
// retry of the latest event with its id, sets its Seq to that event's and
// marks r. Within a batch, a retry of an event put earlier in it is one
// too: the transaction reads its own writes.
func (s *Store) put(tx *bolt.Tx, r *appendReq, seq *uint64) error {
	events, idx := tx.Bucket(bucketEvents), tx.Bucket(bucketIDs)
	e := r.e
	if e.Time.IsZero() {
		e.Time = s.cfg.now()
	}
	v, err := encode(e)
	if err != nil {
		return err
	}
	id := []byte(e.ID)
	ref, n, last := idRef(idx.Get(id))
	if n > 0 && s.isRetry(events.Get(seqKey(last)), v) {
		e.Seq, r.retry = last, true
		return nil
	}
	e.Seq = *seq + 1
	if err := events.Put(seqKey(e.Seq), v); err != nil {
		return err
	}
	if n == 0 {
		ref = e.Seq
	}
	*seq = e.Seq
	return idx.Put(id, idVal(ref, n+1, e.Seq))
}

// isRetry tells whether the event encoded as v is a retry of the one
// recorded as old (nil if none): the same update (the same JSON),
// appended within the retry window.
func (s *Store) isRetry(old, v []byte) bool {
	if s.cfg.window <= 0 || len(old) < 8 || !bytes.Equal(old[8:], v[8:]) {
		return false
	}
	at := func(v []byte) int64 { return int64(binary.BigEndian.Uint64(v)) }
	return time.Duration(at(v)-at(old)) <= s.cfg.window
}

// prune deletes the oldest events beyond the retention limits.
func (s *Store) prune(tx *bolt.Tx) error {
	if s.cfg.maxEvents <= 0 && s.cfg.maxAge <= 0 {
		return nil
	}
	events := tx.Bucket(bucketEvents)
	last, _ := events.Cursor().Last()
	if last == nil {
		return nil
	}
	lastSeq := binary.BigEndian.Uint64(last)
	cutoff := s.cfg.now().Add(-s.cfg.maxAge).UnixNano()
	for {
		k, v := events.Cursor().First()
		if k == nil {
			return nil
		}
		seq := binary.BigEndian.Uint64(k)
		// Seqs are contiguous: pruning only ever removes the oldest.
		overCount := s.cfg.maxEvents > 0 && lastSeq-seq+1 > uint64(s.cfg.maxEvents)
		tooOld := s.cfg.maxAge > 0 && len(v) >= 8 && int64(binary.BigEndian.Uint64(v)) < cutoff
		if !overCount && !tooOld {
			return nil
		}
		if err := s.evict(tx, seq, v); err != nil {
			return err
		}
	}
}

// evict deletes the oldest event, seq, and updates the id index.
func (s *Store) evict(tx *bolt.Tx, seq uint64, v []byte) error {
	events, idx := tx.Bucket(bucketEvents), tx.Bucket(bucketIDs)
	e, err := decode(seq, v)
	if err != nil {
		return err
	}
	if err := events.Delete(seqKey(seq)); err != nil {
		return err
	}
	id := []byte(e.ID)
	ref, n, last := idRef(idx.Get(id))
	if n <= 1 {
		return idx.Delete(id)
	}
	if ref == seq {
		// A later duplicate is now the oldest: find it. Only publishers
		// reusing ids pay for this scan.
		c := events.Cursor()
		for k, v := c.Seek(seqKey(seq + 1)); k != nil; k, v = c.Next() {
			d, err := decode(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			if d.ID == e.ID {
				ref = d.Seq
				break
			}
		}
	}
	return idx.Put(id, idVal(ref, n-1, last))
}

// Replay implements [store.Store]. Events are read in pages, each in its
// own read transaction, up to the Head of the replay. Seqs are contiguous
// and retention drops the oldest first, so a page that does not start
// with the Seq expected next means that retention dropped events under
// the replay: Events then ends with an error wrapping
// [store.ErrHistoryGap].
func (s *Store) Replay(ctx context.Context, lastEventID string) (store.Backlog, error) {
	b := store.Backlog{Cursor: store.Earliest}
	var first []*store.Event
	var from uint64 // the Seq that Events yields first
	err := s.db.View(func(tx *bolt.Tx) error {
		b.Head = lastSeq(tx)
		from = b.Head + 1
		if k, _ := tx.Bucket(bucketEvents).Cursor().First(); len(k) == 8 {
			from = binary.BigEndian.Uint64(k)
		}
		if lastEventID != store.Earliest {
			if ref, n, _ := idRef(tx.Bucket(bucketIDs).Get([]byte(lastEventID))); n > 0 {
				b.Cursor, from = lastEventID, ref+1
			}
		}
		var err error
		first, err = readPage(tx, from, b.Head)
		return err
	})
	if err != nil {
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			err = ErrClosed
		}
		return store.Backlog{}, err
	}
	head := b.Head
	b.Events = func(yield func(*store.Event, error) bool) {
		page, next := first, from
		for next <= head {
			if len(page) == 0 || page[0].Seq != next {
				yield(nil, fmt.Errorf("boltstore: replay at Seq %d: %w", next, store.ErrHistoryGap))
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			// Within a page, read in one transaction, Seqs follow each other.
			next = page[len(page)-1].Seq + 1
			if next > head {
				return
			}
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			err := s.db.View(func(tx *bolt.Tx) error {
				var err error
				page, err = readPage(tx, next, head)
				return err
			})
			if err != nil {
				yield(nil, fmt.Errorf("boltstore: %w", err))
				return
			}
		}
	}
	return b, nil
}

// readPage reads up to replayPage events and about replayPageBytes with
// from <= Seq <= head, seeking directly to from.
func readPage(tx *bolt.Tx, from, head uint64) ([]*store.Event, error) {
	var page []*store.Event
	size := 0
	c := tx.Bucket(bucketEvents).Cursor()
	for k, v := c.Seek(seqKey(from)); k != nil && len(page) < replayPage; k, v = c.Next() {
		seq := binary.BigEndian.Uint64(k)
		if seq > head || len(page) > 0 && size+len(v) > replayPageBytes {
			break
		}
		size += len(v)
		e, err := decode(seq, v)
		if err != nil {
			return nil, err
		}
		page = append(page, e)
	}
	return page, nil
}

// Listen implements [store.Store]. l.Event is called after each commit,
// one event at a time in Seq order, before the Append returns. The feed is
// in-process and never fails: l.Status is not used.
func (s *Store) Listen(l store.Listener) (cancel func()) {
	p := &l
	s.lmu.Lock()
	s.listeners[p] = struct{}{}
	s.lmu.Unlock()
	return func() {
		s.lmu.Lock()
		delete(s.listeners, p)
		s.lmu.Unlock()
	}
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func idVal(oldest, n, latest uint64) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 24), oldest)
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(v, n), latest)
}

// idRef decodes an "ids" value: the oldest retained Seq, the count of
// retained events with the id (0 when absent) and the latest Seq (0 when
// unknown: a value written before it was recorded, of an id reused).
func idRef(v []byte) (oldest, n, latest uint64) {
	if len(v) != 16 && len(v) != 24 {
		return 0, 0, 0
	}
	oldest, n = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
	switch {
	case len(v) == 24:
		latest = binary.BigEndian.Uint64(v[16:])
	case n == 1:
		latest = oldest
	}
	return oldest, n, latest
}

// encode returns the value stored for e: its time in Unix nanoseconds,
// big-endian, then the JSON of its update, so that pruning by age reads
// only 8 bytes.
func encode(e *store.Event) ([]byte, error) {
	withoutTime := *e // the time is kept apart
	withoutTime.Time = time.Time{}
	j, _, err := store.MarshalEvent(&withoutTime)
	if err != nil {
		return nil, err
	}
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(j)), uint64(e.Time.UnixNano()))
	return append(v, j...), nil
}

func decode(seq uint64, v []byte) (*store.Event, error) {
	if len(v) < 8 {
		return nil, fmt.Errorf("boltstore: event %d: short value", seq)
	}
	e := &store.Event{Seq: seq}
	if err := store.UnmarshalEvent(v[8:], e); err != nil {
		return nil, fmt.Errorf("boltstore: event %d: %w", seq, err)
	}
	e.Time = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
	return e, nil
}
