// Package redisstore is a [mercure.Store] on a Redis stream, shared by
// every hub (in any number of processes) that uses the same stream key: it
// lets several application instances act as one Mercure hub.
//
// Layout: each event is one entry of the stream, with an auto-generated
// id, holding a single field "e" with the JSON of the event (its Update
// fields and Time). The hash stream+":ids" maps an update id to the stream
// id of its oldest retained occurrence (REC-7). Both are written by one Lua
// script, atomically; in Redis Cluster, give the stream key a hash tag
// (such as "{mercure}") so that both keys live in the same slot.
//
// Seq: the stream entry id "ms-n" maps to ms<<20 | n. It fits in 64 bits
// for any millisecond time before the year 2527, and it is strictly
// increasing because stream ids are. Redis gives n ≥ 2^20 only to more
// than a million entries added in one millisecond (or while the server's
// clock is stepped back): Append then removes the entry and fails.
//
// Retention: [WithMaxLen] trims the stream approximately (XADD MAXLEN ~).
// A hash entry may then point to a trimmed stream entry: that cursor is
// treated as unknown (the backlog holds every retained event) until the id
// is published again. Hash entries of trimmed events are not removed.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by Append and Replay once the store is closed.
var ErrClosed = errors.New("redisstore: store closed")

const (
	field      = "e" // the stream entry field holding the event
	seqBits    = 20  // bits of Seq given to the sequence part of an entry id
	replayPage = 512 // entries per XRANGE of Replay
	readCount  = 512 // entries per XREAD of the listener feed
	maxBackoff = 5 * time.Second
	minBackoff = 50 * time.Millisecond
)

// block is how long one XREAD of the feed blocks. go-redis does not
// interrupt a blocked read when its context is cancelled, so Close waits
// up to about that long for the reader to stop; an idle Store costs one
// XREAD per block.
const block = 200 * time.Millisecond

// Option configures [New].
type Option func(*config)

type config struct {
	maxLen int64
}

// WithMaxLen trims the stream to about n entries (XADD MAXLEN ~ n); n <= 0
// means no limit (the default).
func WithMaxLen(n int64) Option { return func(c *config) { c.maxLen = n } }

// Store is a [mercure.Store] on a Redis stream. The zero value is not
// usable; call [New].
type Store struct {
	rdb          redis.UniversalClient
	stream, ids  string
	cfg          config
	appendScript *redis.Script
	replayScript *redis.Script

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// appended is the highest Seq appended by this Store: a listener
	// added later skips the events up to it, which Append already
	// returned before Listen was called.
	appended atomic.Uint64

	lmu       sync.Mutex
	listeners map[*listener]struct{}
}

type listener struct {
	fn    func(*mercure.Event)
	after uint64 // skip events with Seq <= after
}

// appendLua adds the event, checks that its id maps to a Seq, and records
// the id's oldest retained occurrence.
//
// KEYS: stream, ids hash. ARGV: event JSON, update id, max length (0: none).
const appendLua = `
local id
local maxlen = tonumber(ARGV[3])
if maxlen > 0 then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'e', ARGV[1])
else
  id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[1])
end
local n = tonumber(string.match(id, '-(%d+)$'))
if n >= 1048576 then
  redis.call('XDEL', KEYS[1], id)
  return redis.error_reply('redisstore: stream id ' .. id .. ' exceeds 2^20 entries in one millisecond')
end
local old = redis.call('HGET', KEYS[2], ARGV[2])
if not old or #redis.call('XRANGE', KEYS[1], old, old) == 0 then
  redis.call('HSET', KEYS[2], ARGV[2], id)
end
return id
`

// replayLua returns the stream's last entry id and the stream id of the
// oldest retained occurrence of ARGV[1] ("" when none), atomically.
//
// KEYS: stream, ids hash. ARGV: update id, or "" for none.
const replayLua = `
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local head = ''
if #last > 0 then head = last[1][1] end
local cursor = ''
if ARGV[1] ~= '' then
  local id = redis.call('HGET', KEYS[2], ARGV[1])
  if id and #redis.call('XRANGE', KEYS[1], id, id) > 0 then cursor = id end
end
return {head, cursor}
`

// New returns a store on the stream key stream. Listeners receive every
// event appended after New returns, by any hub sharing the stream. Close
// stops the store; the client stays open.
func New(client redis.UniversalClient, stream string, opts ...Option) (*Store, error) {
	if client == nil || stream == "" {
		return nil, errors.New("redisstore: client and stream are required")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		rdb:          client,
		stream:       stream,
		ids:          stream + ":ids",
		cfg:          cfg,
		appendScript: redis.NewScript(appendLua),
		replayScript: redis.NewScript(replayLua),
		ctx:          ctx,
		cancel:       cancel,
		listeners:    make(map[*listener]struct{}),
	}
	// The feed starts after the last entry now: reading from "$" in each
	// XREAD would miss the entries added between two reads.
	last, err := s.lastID(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	s.wg.Add(1)
	go s.readLoop(last)
	return s, nil
}

// lastID returns the id of the stream's last entry, "0-0" when empty.
func (s *Store) lastID(ctx context.Context) (string, error) {
	msgs, err := s.rdb.XRevRangeN(ctx, s.stream, "+", "-", 1).Result()
	if err != nil {
		return "", err
	}
	if len(msgs) == 0 {
		return "0-0", nil
	}
	return msgs[0].ID, nil
}

// Close stops the feed's reader. It does not close the client.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
	})
	return nil
}

func (s *Store) closed() bool { return s.ctx.Err() != nil }

// Append implements [mercure.Store]. It returns once Redis has added the
// event to the stream; listeners get it from the feed, possibly later.
func (s *Store) Append(ctx context.Context, e *mercure.Event) error {
	if s.closed() {
		return ErrClosed
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	v, err := encode(e)
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	id, err := s.appendScript.Run(ctx, s.rdb, []string{s.stream, s.ids}, v, e.ID, s.cfg.maxLen).Text()
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	seq, err := parseID(id)
	if err != nil {
		return err
	}
	e.Seq = seq
	for {
		cur := s.appended.Load()
		if cur >= seq || s.appended.CompareAndSwap(cur, seq) {
			return nil
		}
	}
}

// Replay implements [mercure.Store]. Head and the cursor are resolved
// atomically; events are then read in pages of 512, up to Head.
func (s *Store) Replay(ctx context.Context, lastEventID string) (mercure.Backlog, error) {
	if s.closed() {
		return mercure.Backlog{}, ErrClosed
	}
	arg := lastEventID
	if arg == mercure.Earliest {
		arg = ""
	}
	res, err := s.replayScript.Run(ctx, s.rdb, []string{s.stream, s.ids}, arg).StringSlice()
	if err != nil {
		return mercure.Backlog{}, fmt.Errorf("redisstore: %w", err)
	}
	if len(res) != 2 {
		return mercure.Backlog{}, fmt.Errorf("redisstore: unexpected replay reply %q", res)
	}
	b := mercure.Backlog{Cursor: mercure.Earliest}
	head := res[0]
	if head == "" {
		b.Events = func(func(*mercure.Event, error) bool) {}
		return b, nil
	}
	if b.Head, err = parseID(head); err != nil {
		return mercure.Backlog{}, err
	}
	start := "-"
	if res[1] != "" {
		b.Cursor, start = lastEventID, "("+res[1]
	}
	b.Events = func(yield func(*mercure.Event, error) bool) {
		for {
			msgs, err := s.rdb.XRangeN(ctx, s.stream, start, head, replayPage).Result()
			if err != nil {
				yield(nil, fmt.Errorf("redisstore: %w", err))
				return
			}
			for _, m := range msgs {
				e, err := decode(m)
				if err != nil {
					yield(nil, err)
					return
				}
				if !yield(e, nil) {
					return
				}
			}
			if len(msgs) < replayPage || msgs[len(msgs)-1].ID == head {
				return
			}
			start = "(" + msgs[len(msgs)-1].ID
		}
	}
	return b, nil
}

// Listen implements [mercure.Store]. fn is called from the store's reader
// goroutine, one event at a time in Seq order. Events this Store appended
// before Listen was called are not delivered to fn.
func (s *Store) Listen(fn func(*mercure.Event)) (cancel func()) {
	s.lmu.Lock()
	l := &listener{fn: fn, after: s.appended.Load()}
	s.listeners[l] = struct{}{}
	s.lmu.Unlock()
	return func() {
		s.lmu.Lock()
		delete(s.listeners, l)
		s.lmu.Unlock()
	}
}

// readLoop feeds the listeners from the stream, starting after the entry
// id last. On errors it retries with backoff and resumes after the last
// entry it delivered.
func (s *Store) readLoop(last string) {
	defer s.wg.Done()
	backoff := minBackoff
	for !s.closed() {
		res, err := s.rdb.XRead(s.ctx, &redis.XReadArgs{
			Streams: []string{s.stream, last},
			Count:   readCount,
			Block:   block,
		}).Result()
		if errors.Is(err, redis.Nil) {
			backoff = minBackoff
			continue // the block timed out
		}
		if err != nil {
			if s.closed() {
				return
			}
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		for _, st := range res {
			for _, m := range st.Messages {
				last = m.ID
				e, err := decode(m)
				if err != nil {
					// An entry written by something else than a Store:
					// skip it rather than stall the feed.
					continue
				}
				s.deliver(e)
			}
		}
	}
}

func (s *Store) deliver(e *mercure.Event) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	for l := range s.listeners {
		if e.Seq > l.after {
			l.fn(e)
		}
	}
}

// parseID maps a stream entry id "ms-n" to ms<<20 | n.
func parseID(id string) (uint64, error) {
	msPart, nPart, ok := strings.Cut(id, "-")
	if !ok {
		return 0, fmt.Errorf("redisstore: malformed stream id %q", id)
	}
	ms, err1 := strconv.ParseUint(msPart, 10, 64)
	n, err2 := strconv.ParseUint(nPart, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("redisstore: malformed stream id %q", id)
	}
	if n >= 1<<seqBits || ms >= 1<<(64-seqBits) {
		return 0, fmt.Errorf("redisstore: stream id %q does not fit a Seq", id)
	}
	if seq := ms<<seqBits | n; seq != 0 {
		return seq, nil
	}
	return 0, fmt.Errorf("redisstore: stream id %q maps to Seq 0", id)
}

// record is the JSON form of an event.
type record struct {
	Topics  []string `json:"t"`
	Data    string   `json:"d,omitempty"`
	Private bool     `json:"p,omitempty"`
	ID      string   `json:"i"`
	Type    string   `json:"y,omitempty"`
	Retry   *int64   `json:"r,omitempty"` // nanoseconds
	Time    int64    `json:"ts"`          // Unix nanoseconds
}

func encode(e *mercure.Event) ([]byte, error) {
	r := record{Topics: e.Topics, Data: e.Data, Private: e.Private, ID: e.ID, Type: e.Type, Time: e.Time.UnixNano()}
	if e.Retry != nil {
		ns := int64(*e.Retry)
		r.Retry = &ns
	}
	return json.Marshal(r)
}

func decode(m redis.XMessage) (*mercure.Event, error) {
	seq, err := parseID(m.ID)
	if err != nil {
		return nil, err
	}
	v, ok := m.Values[field].(string)
	if !ok {
		return nil, fmt.Errorf("redisstore: entry %s: no field %q", m.ID, field)
	}
	var r record
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return nil, fmt.Errorf("redisstore: entry %s: %w", m.ID, err)
	}
	e := &mercure.Event{
		Update: mercure.Update{Topics: r.Topics, Data: r.Data, Private: r.Private, ID: r.ID, Type: r.Type},
		Seq:    seq,
		Time:   time.Unix(0, r.Time),
	}
	if r.Retry != nil {
		d := time.Duration(*r.Retry)
		e.Retry = &d
	}
	return e, nil
}
