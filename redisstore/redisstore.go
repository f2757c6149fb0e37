// Package redisstore is a [store.Store] on a Redis stream, shared by
// every hub (in any number of processes) that uses the same stream key: it
// lets several application instances act as one Mercure hub. It needs
// Redis 5 or later (Lua scripting and streams).
//
// Layout: each event is one entry of the stream, with an auto-generated
// id, holding a field "e" with the JSON of the event (its Update fields
// and Time), a field "i" with its update id and a field "n" with its
// number in the stream, from the counter stream+":n". The hash
// stream+":ids" maps an update id to the stream ids of its retained
// occurrences, oldest first, so that a cursor resolves to the oldest
// (spec §Reconnection, State Reconciliation, and Event Sourcing) without a
// scan. All are written by one Lua script, atomically. In Redis Cluster,
// give the stream key a hash tag (such as "{mercure}") so that every key of
// the store lives in the same slot. The shared subscriptions use more keys
// (see [Store.UpdateSubscriptions]).
//
// Appends are idempotent: a command that go-redis retries after a lost
// reply finds its event already recorded (the latest occurrence of its id,
// byte for byte with the same Time) and returns that entry rather than
// adding a second one. Client retries are therefore safe, and useful: they
// ride over a dropped connection. A publisher's retry is recognised the
// same way (see [store.Store.Append]): each entry holds, in a field
// "h", the SHA-256 of its update without its time, and an append whose
// digest is that of the latest occurrence of its id, added (by the entry
// id's time) within the retry window before the event's Time, returns that
// entry. Only the latest occurrence is checked: a retry that lands after
// another update with the same id, from another hub, records it again.
//
// Outages: each call to Redis is bounded by [WithTimeout], so that Append
// fails rather than hang while Redis is unreachable (the hub answers 503).
// Create the client with ContextTimeoutEnabled: true: go-redis otherwise
// ignores deadlines on reads and writes, and a Redis that stops answering
// (paused, or behind a dropped network) holds each call for the client's
// read timeout and each read of the feed for 10 s. go-redis also bounds
// each read and write by the client's ReadTimeout and WriteTimeout (5 s
// by default), whichever ends first: a WithTimeout longer than those
// gives a slow Redis no more time unless they are raised too. The feed reports the
// outage to its listeners (see [store.Listener]) and resumes after the
// last entry it delivered; if entries were trimmed meanwhile, it tells
// them of the gap. With a Redis that persists its data (appendonly yes,
// appendfsync always for no loss at all), a restart loses nothing that
// Append acknowledged.
//
// Failover: the store works behind Sentinel (go-redis's failover
// client, [redis.NewFailoverClient]) and on Redis Cluster
// ([redis.NewClusterClient]; New refuses a stream key without a hash tag,
// and a client that reads from replicas). Appends and the feed follow
// the new primary by themselves. Redis replicates asynchronously: a
// replica promoted before it received the last appends loses them. The
// feed checks, after every error and every second, that the stream
// still holds the last entry it delivered; when it does not, it tells
// its listeners that the history was rewound (see [store.Listener]), so
// that the hub ends its streams and their clients resume from history
// (a client whose last event was lost is told so: spec §Reconnection,
// State Reconciliation, and Event Sourcing), and it goes on with the
// entries of the new primary: none is skipped or delivered twice. The
// ids of the events it had delivered that the new primary lacks (the
// last [store.PassedCap] it delivered at most) stay
// unknown cursors for a day (the set stream+":vanished"): a client that
// got one resumes from the start of history, not after a retry of the
// same update that the new primary recorded later, past updates it never
// got. With
// [WithReplicas] n, an append is acknowledged only once n replicas have
// it: Sentinel and Cluster promote the replica that received the most
// (by replication offset), so that a failover loses no acknowledged
// update unless the n replicas that had it fail too.
//
// Seq: the stream entry id "ms-n" maps to ms<<20 | n. It fits in 64 bits
// for any millisecond time before the year 2527, and it is strictly
// increasing because stream ids are. Redis gives n ≥ 2^20 only to more
// than a million entries added in one millisecond (or while the server's
// clock is stepped back): Append then removes the entry and fails.
//
// Replay reads the stream a page at a time: at most 512 entries and about
// 1 MiB of their fields (at least one entry), chosen by a script that
// reads at most 16 entries at a time, fewer when they are large, so that
// neither the hub nor Redis holds, or Redis reads, much more than a page
// of a history of large events at once.
//
// Retention: with [WithMaxLen] n, the append script trims the stream in
// batches once it exceeds n by a slack of n/64 (at least 1, at most 100
// entries): like XADD MAXLEN ~, it keeps at least n entries and a little
// more, and it removes the trimmed occurrences from the hash, so that the
// hash stays as small as the stream. Past 64 retained occurrences of one
// id, only the first 63 and the latest are recorded: once those first ones
// are trimmed, the id is an unknown cursor (the backlog holds every
// retained event: duplicates rather than a gap) until the latest is.
// Entries an operator trims are dropped from the lists as they are met. A
// replay that trimming overtakes, taking entries it has yet to read, ends
// with an error wrapping [store.ErrHistoryGap] (see [Store.Replay]).
package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
	"github.com/redis/go-redis/v9"
)

var (
	// ErrClosed is returned by Append and Replay once the store is closed.
	ErrClosed = errors.New("redisstore: store closed")
	// ErrNotReplicated is wrapped by the error of an Append that fewer
	// replicas acknowledged than [WithReplicas] asks for, in time. The
	// update is recorded on the primary, and may be lost if it fails
	// before the replicas have it: send it again.
	ErrNotReplicated = errors.New("redisstore: update not acknowledged by enough replicas")
)

const (
	field      = "e"     // the stream entry field holding the event
	seqBits    = 20      // bits of Seq given to the sequence part of an entry id
	replayPage = 512     // entries per page of Replay
	pageBytes  = 1 << 20 // bytes of fields per page of Replay (at least one entry)
	readCount  = 512     // entries per XREAD of the listener feed
	maxOcc     = 64      // occurrences of one update id recorded in the ids hash
	// The feed reconnects after minBackoff, doubling up to maxBackoff,
	// and after minBackoff again once it worked. The hub refuses to
	// publish while its feed is down, so the feed must come back within
	// about a second of the server, not after a long wait that only
	// prolongs the refusals (issue 23 item 4).
	maxBackoff = time.Second
	minBackoff = 50 * time.Millisecond

	// DefaultTimeout bounds each call to Redis (see [WithTimeout]).
	DefaultTimeout = 5 * time.Second
)

// block is how long one XREAD of the feed blocks. go-redis does not
// interrupt a blocked read when its context is cancelled, so Close waits
// up to about that long for the reader to stop; an idle Store costs one
// XREAD per block.
const block = 200 * time.Millisecond

// Option configures [New]. Options validate their arguments: a bad value
// makes New fail with an error wrapping [mercure.ErrInvalidOption].
type Option func(*config) error

type config struct {
	maxLen  int64
	timeout time.Duration
	subTTL  time.Duration
	window  time.Duration
	// replicas is how many replicas must have an append before it is
	// acknowledged (see WithReplicas).
	replicas int
	// presenceBackoff is the subscriptions writer's first wait after a
	// failed write, minBackoff; tests lengthen it (export_test.go).
	presenceBackoff time.Duration
}

// DefaultMaxLen is about how many entries a store keeps unless
// [WithMaxLen] says otherwise: history that any client may ask to replay
// (with Last-Event-ID: earliest), and that Redis keeps in memory, must
// have a bound.
const DefaultMaxLen = 100_000

// WithMaxLen keeps about n entries in the stream, at least n (see the
// package documentation); 0 means no limit. The default is
// [DefaultMaxLen].
func WithMaxLen(n int64) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: redisstore.WithMaxLen(%d) is negative", mercure.ErrInvalidOption, n)
		}
		c.maxLen = n
		return nil
	}
}

// WithTimeout bounds each call the store makes to Redis (an append, the
// start of a replay, one page of a replay, a write of the shared
// subscriptions) and how long a read of the feed may outlast its block
// before the feed is reported failing; it must be positive. The default
// is [DefaultTimeout]. The client's own retries happen within it.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: redisstore.WithTimeout(%v) is not positive", mercure.ErrInvalidOption, d)
		}
		c.timeout = d
		return nil
	}
}

// WithRetryWindow sets how long after an update was recorded the same
// update appended again is taken for a retry and not recorded twice (see
// [store.Store.Append] and the package documentation); 0 records every
// publisher's append, and only go-redis's own retries are recognised. The
// default is [store.DefaultRetryWindow].
func WithRetryWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: redisstore.WithRetryWindow(%v) is negative", mercure.ErrInvalidOption, d)
		}
		c.window = d
		return nil
	}
}

// WithReplicas acknowledges an append only once n replicas of the
// primary have it (the WAIT command, on the append's connection), so
// that a failover to any of them loses no acknowledged update: with
// Sentinel, promote only replicas that can have it (see the package
// documentation). WAIT waits up to three quarters of [WithTimeout]; an
// append that fewer replicas acknowledged in that time fails with an
// error wrapping [ErrNotReplicated]. It is recorded on the primary all
// the same, and delivered: the publisher's retry of the same update is
// taken for a retry (see [WithRetryWindow]) and waits for the replicas
// again. The default, 0, acknowledges an append once the primary has it.
func WithReplicas(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: redisstore.WithReplicas(%d) is negative", mercure.ErrInvalidOption, n)
		}
		c.replicas = n
		return nil
	}
}

// The store's interfaces, checked by the compiler: the hub finds the
// optional ones by a type assertion, which would otherwise fail silently.
var (
	_ store.LatestStore       = (*Store)(nil)
	_ store.SubscriptionStore = (*Store)(nil)
)

// Store is a [store.Store] on a Redis stream. The zero value is not
// usable; call [New].
type Store struct {
	rdb          redis.UniversalClient
	stream, ids  string
	counter      string // numbers the entries, so that the feed sees gaps
	vanished     string // the ids of events a failover lost (see verify)
	cfg          config
	appendScript *redis.Script
	replayScript *redis.Script
	pageScript   *redis.Script
	checkScript  *redis.Script

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// latest is the latest event known to this Store (see LatestID).
	latest store.Latest

	listeners store.Fanout
	// passed keeps the last events the feed passed on (see verify).
	passed store.Passed

	presence presence
}

// occLua holds the functions of both scripts for the lists of occurrences
// kept in the ids hash: the stream ids of an update id's retained events,
// oldest first, space-separated. Past maxOcc occurrences, a list holds
// the first maxOcc-1, the gap marker "~", which stands for one or more
// occurrences not recorded, and the latest, which is always last.
const occLua = `
local GAP = '~'
local function split(s)
  local t = {}
  for w in string.gmatch(s, '%S+') do t[#t + 1] = w end
  return t
end
-- le tells whether stream id a is not after stream id b.
local function le(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as <= bs)
end
-- forget removes from the head of occ the occurrences that are not after
-- stream id upto; with upto nil, those that are no longer in the stream.
local function forget(occ, upto)
  local function gone(id)
    if upto then return le(id, upto) end
    return #redis.call('XRANGE', KEYS[1], id, id) == 0
  end
  while #occ > 0 do
    if occ[1] == GAP then
      -- Every occurrence the gap stands for is older than the next entry.
      if #occ >= 2 and gone(occ[2]) then
        table.remove(occ, 1)
        table.remove(occ, 1)
      else
        break
      end
    elseif gone(occ[1]) then
      table.remove(occ, 1)
    else
      break
    end
  end
end
`

// appendLua adds the event unless it is a retry of the latest occurrence
// of its id (then it returns that entry): the same JSON (go-redis resent
// the command), or the same digest, added within the retry window before
// the event's time. It numbers the event, checks that its entry id maps
// to a Seq, and records the occurrence. Past max length + slack, it trims
// up to 100 of the oldest entries and their occurrences.
//
// KEYS: stream, ids hash, counter. ARGV: event JSON, update id, max length
// (0: none), slack, maxOcc, digest, the event's time and the retry window
// in milliseconds.
const appendLua = occLua + `
local occ = {}
local ref = redis.call('HGET', KEYS[2], ARGV[2])
if ref then
  occ = split(ref)
  local last = occ[#occ]
  local e = redis.call('XRANGE', KEYS[1], last, last)
  if #e > 0 then
    local f, body, digest = e[1][2], nil, nil
    for i = 1, #f - 1, 2 do
      if f[i] == 'e' then body = f[i + 1] elseif f[i] == 'h' then digest = f[i + 1] end
    end
    if body == ARGV[1] then return last end
    local window = tonumber(ARGV[8])
    local at = tonumber(string.match(last, '^(%d+)-'))
    if window > 0 and digest == ARGV[6] and at >= tonumber(ARGV[7]) - window then return last end
  end
  forget(occ, nil) -- entries trimmed by someone else
end
local n = redis.call('INCR', KEYS[3])
local id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[1], 'i', ARGV[2], 'n', n, 'h', ARGV[6])
if tonumber(string.match(id, '-(%d+)$')) >= 1048576 then
  redis.call('XDEL', KEYS[1], id)
  redis.call('DECR', KEYS[3])
  return redis.error_reply('redisstore: stream id ' .. id .. ' exceeds 2^20 entries in one millisecond')
end
if #occ >= tonumber(ARGV[5]) then
  if occ[#occ - 1] == GAP then occ[#occ] = id else occ[#occ] = GAP; occ[#occ + 1] = id end
else
  occ[#occ + 1] = id
end
redis.call('HSET', KEYS[2], ARGV[2], table.concat(occ, ' '))
local maxlen = tonumber(ARGV[3])
if maxlen > 0 then
  local len = redis.call('XLEN', KEYS[1])
  local over = len - maxlen
  if over >= tonumber(ARGV[4]) then
    local old = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', math.min(over, 100))
    for _, e in ipairs(old) do
      local f = e[2]
      for i = 1, #f - 1, 2 do
        if f[i] == 'i' then
          local r = redis.call('HGET', KEYS[2], f[i + 1])
          if r then
            local o = split(r)
            forget(o, e[1])
            if #o == 0 then
              redis.call('HDEL', KEYS[2], f[i + 1])
            else
              redis.call('HSET', KEYS[2], f[i + 1], table.concat(o, ' '))
            end
          end
        end
      end
    end
    redis.call('XTRIM', KEYS[1], 'MAXLEN', len - #old) -- exactly the entries read
  end
end
return id
`

// replayLua returns, atomically, the ids of the stream's last and first
// entries, and the stream id and number of the oldest retained occurrence
// of ARGV[1] ("" when none, or when it may be one the list does not
// record, or when an event with that id vanished in a failover; the
// number is "" for an entry without one).
//
// KEYS: stream, ids hash, vanished set. ARGV: update id, or "" for none.
const replayLua = occLua + `
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last == 0 then return {'', '', '', ''} end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local cursor, n = '', ''
if ARGV[1] ~= '' and redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 0 then
  local ref = redis.call('HGET', KEYS[2], ARGV[1])
  if ref then
    local occ = split(ref)
    forget(occ, nil)
    if #occ > 0 and occ[1] ~= GAP then
      local e = redis.call('XRANGE', KEYS[1], occ[1], occ[1])
      if #e > 0 then
        cursor = occ[1]
        local f = e[1][2]
        for i = 1, #f - 1, 2 do
          if f[i] == 'n' then n = f[i + 1] end
        end
      end
    end
  end
end
return {last[1][1], first[1][1], cursor, n}
`

// pageLua returns, from the entry ARGV[1] on (itself included) up to
// ARGV[2], at most ARGV[3] entries and, past the first, no more than
// ARGV[4] bytes of fields, preceded by 1 if it stopped at a bound before
// ARGV[2], 0 if not. With ARGV[5] = 1, entry ARGV[1] was returned before:
// if it is still there, it comes first with its id alone, and its fields
// count neither in the bytes nor as the page's first entry.
//
// It reads a few entries at a time (at most 16): as many as the bytes
// left have room for at the mean size of the entries read so far, and one
// more to find where the page ends; the next read starts past the last
// entry read (ms-n+1; Redis 5 has no exclusive ranges). Redis too holds
// and reads little more than the page: large entries are not read 16
// times over for the one or two that fit.
//
// KEYS: stream.
const pageLua = `
local out, size, taken = {0}, 0, 0 -- taken: entries returned with their fields
local from, maxn, maxb = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local passed = ARGV[5] == '1'
local want = 1 -- nothing is known of the entries' size yet
if passed then want = 2 end
local skip = false -- from was added already (an id past which no next id is written)
while true do
  local n = want
  if skip then n = n + 1 end
  local chunk = redis.call('XRANGE', KEYS[1], from, ARGV[2], 'COUNT', n)
  for i, e in ipairs(chunk) do
    if not (skip and i == 1 and e[1] == from) then
      if passed and #out == 1 and e[1] == ARGV[1] then
        out[2] = {e[1], {}}
      else
        local b = 0
        for j = 2, #e[2], 2 do b = b + #e[2][j] end
        if taken > 0 and size + b > maxb then out[1] = 1 return out end
        out[#out + 1] = e
        size, taken = size + b, taken + 1
      end
      if #out - 1 >= maxn then out[1] = 1 return out end
    end
  end
  if #chunk < n then return out end
  local last = chunk[#chunk][1]
  local ms, seq = string.match(last, '^(%d+)-(%d+)$')
  if seq and #seq < 15 then -- exact in a Lua number
    from, skip = ms .. '-' .. string.format('%d', tonumber(seq) + 1), false
  else
    from, skip = last, true
  end
  want = 16
  if taken == 0 then
    want = 1
  elseif size > 0 then
    want = math.floor((maxb - size) * taken / size) + 1
  end
  want = math.max(1, math.min(want, 16, maxn - (#out - 1)))
end
`

// New returns a store on the stream key stream. Listeners receive every
// event appended after New returns, by any hub sharing the stream. Close
// stops the store; the client stays open.
//
// New fails when Redis cannot be reached within the timeout: a hub
// should not start without its history.
func New(client redis.UniversalClient, stream string, opts ...Option) (*Store, error) {
	if client == nil || stream == "" {
		return nil, fmt.Errorf("%w: redisstore.New needs a client and a stream key", mercure.ErrInvalidOption)
	}
	cfg := config{maxLen: DefaultMaxLen, timeout: DefaultTimeout, subTTL: DefaultSubscriptionTTL, window: store.DefaultRetryWindow,
		presenceBackoff: minBackoff}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil redisstore.Option", mercure.ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if c, ok := client.(*redis.ClusterClient); ok {
		if err := clusterReady(c.Options(), stream); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		rdb:          client,
		stream:       stream,
		ids:          stream + ":ids",
		counter:      stream + ":n",
		vanished:     stream + ":vanished",
		cfg:          cfg,
		appendScript: redis.NewScript(appendLua),
		replayScript: redis.NewScript(replayLua),
		pageScript:   redis.NewScript(pageLua),
		checkScript:  redis.NewScript(checkLua),
		ctx:          ctx,
		cancel:       cancel,
	}
	s.presence.init(s)
	// The feed starts after the last entry now: reading from "$" in each
	// XREAD would miss the entries added between two reads.
	last, n, err := s.lastEntry(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	s.wg.Add(1)
	go s.readLoop(last, n)
	return s, nil
}

// clusterReady tells why a store on stream cannot work with a cluster
// client of opts, if it cannot: the store's scripts take several keys,
// which Redis Cluster runs only when they are in one slot, and its feed
// must read the primary, not a replica that lags behind it.
func clusterReady(opts *redis.ClusterOptions, stream string) error {
	open := strings.IndexByte(stream, '{')
	if open < 0 || strings.IndexByte(stream[open+1:], '}') < 1 {
		return fmt.Errorf("%w: redisstore: in Redis Cluster, the stream key %q needs a hash tag, such as {%s}, so that every key of the store is in one slot",
			mercure.ErrInvalidOption, stream, stream)
	}
	if opts.ReadOnly || opts.RouteByLatency || opts.RouteRandomly {
		return fmt.Errorf("%w: redisstore: the cluster client reads from replicas (ReadOnly, RouteByLatency or RouteRandomly): the store must read the primary", mercure.ErrInvalidOption)
	}
	return nil
}

// lastEntry returns the id of the stream's last entry, "0-0" when empty,
// and the value of the counter then: the number of the next entry, minus
// one. It records the last entry's event as the latest.
func (s *Store) lastEntry(ctx context.Context) (id string, n uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	var last *redis.XMessageSliceCmd
	var counter *redis.StringCmd
	_, err = s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		last = pipe.XRevRangeN(ctx, s.stream, "+", "-", 1)
		counter = pipe.Get(ctx, s.counter)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, err
	}
	n, _ = counter.Uint64() // 0 when there is no counter yet
	msgs := last.Val()
	if len(msgs) == 0 {
		return "0-0", n, nil
	}
	if e, err := decode(msgs[0]); err == nil {
		s.latest.Seen(e.Seq, e.ID)
	}
	return msgs[0].ID, n, nil
}

// number returns an entry's number, 0 if it has none.
func number(m redis.XMessage) uint64 {
	v, _ := m.Values["n"].(string)
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// LatestID returns the id of the latest event this Store has appended or
// read from the stream, including the last one in the stream when New
// was called; [store.Earliest] if none. It implements
// [store.LatestStore], so that a hub started on a stream with history
// reports its last event id (spec §Reconnection, State Reconciliation, and
// Event Sourcing).
func (s *Store) LatestID() string {
	return s.latest.ID()
}

// Close stops the feed's reader and withdraws this store's subscriptions
// from the stream's shared list (see [Store.UpdateSubscriptions]). It
// does not close the client.
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

// Append implements [store.Store]. It returns once Redis has added the
// event to the stream; listeners get it from the feed, possibly later.
// It ignores ctx's cancellation: [WithTimeout] bounds it.
func (s *Store) Append(ctx context.Context, e *store.Event) error {
	if s.closed() {
		return ErrClosed
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	v, digest, err := store.MarshalEvent(e)
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	// The project's context contract: ctx carries values only; the store
	// bounds its own time. An update the hub accepted is recorded even
	// if its caller has gone.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.timeout)
	defer cancel()
	id, err := s.runAppend(ctx, v, e.ID, s.cfg.maxLen, s.slack(), maxOcc,
		hex.EncodeToString(digest[:]), e.Time.UnixMilli(), s.cfg.window.Milliseconds())
	s.failed(err)
	if err != nil {
		return fmt.Errorf("redisstore: append: %w", err)
	}
	seq, err := parseID(id)
	if err != nil {
		return err
	}
	e.Seq = seq
	s.latest.Seen(seq, e.ID)
	s.listeners.Appended(seq)
	return nil
}

// runAppend runs the append script with args and returns the entry's
// id. With [WithReplicas], it sends WAIT on the same connection, in the
// same round trip, and fails unless enough replicas acknowledged.
func (s *Store) runAppend(ctx context.Context, args ...any) (string, error) {
	keys := []string{s.stream, s.ids, s.counter}
	if s.cfg.replicas == 0 {
		return s.appendScript.Run(ctx, s.rdb, keys, args...).Text()
	}
	// WAIT counts the replicas that have the writes of its own
	// connection: in a cluster, that of the primary of the store's slot.
	rdb, ok := s.rdb.(*redis.Client) // a failover client is one too
	if c, cluster := s.rdb.(*redis.ClusterClient); cluster {
		node, err := c.MasterForKey(ctx, s.stream)
		if err != nil {
			return "", err
		}
		rdb, ok = node, true
	}
	if !ok {
		return "", fmt.Errorf("WithReplicas needs a *redis.Client or *redis.ClusterClient, not %T", s.rdb)
	}
	wait := s.waitTimeout(rdb.Options().ReadTimeout)
	var run, acked *redis.Cmd
	pipe := func(eval func(redis.Pipeliner) *redis.Cmd) error {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			run = eval(p)
			acked = p.Do(ctx, "WAIT", s.cfg.replicas, wait.Milliseconds())
			return nil
		})
		return err
	}
	err := pipe(func(p redis.Pipeliner) *redis.Cmd { return s.appendScript.EvalSha(ctx, p, keys, args...) })
	if err != nil && redis.HasErrorPrefix(run.Err(), "NOSCRIPT") {
		// A server that does not have the script yet (new, restarted,
		// promoted): send it whole, once.
		err = pipe(func(p redis.Pipeliner) *redis.Cmd { return s.appendScript.Eval(ctx, p, keys, args...) })
	}
	if err := run.Err(); err != nil {
		return "", err
	}
	if err != nil {
		return "", err // WAIT's
	}
	if n, err := acked.Int64(); err != nil {
		return "", err
	} else if n < int64(s.cfg.replicas) {
		return "", fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, n, s.cfg.replicas, wait)
	}
	return run.Text()
}

// waitTimeout is how long WAIT waits for the replicas: three quarters of
// the store's timeout, and of the client's read timeout (go-redis's
// default when 0, none when negative), which would otherwise cut the
// reply short.
func (s *Store) waitTimeout(read time.Duration) time.Duration {
	d := s.cfg.timeout * 3 / 4
	if read == 0 {
		read = 3 * time.Second
	}
	if read > 0 {
		d = min(d, read*3/4)
	}
	return max(d, time.Millisecond)
}

// Replay implements [store.Store]. Head and the cursor are resolved
// atomically; events are then read in pages of at most 512 and about
// 1 MiB, up to Head.
//
// Retention trims the oldest entries first, so while the entry a page
// starts from (the cursor's, the last one read, or for Earliest the first
// entry when the replay began) is still in the stream, no entry after it
// has been trimmed. When it is gone, the entries' numbers tell whether
// any entry a Store wrote went with it: the next numbered entry must
// follow the last one passed. If not, or if there is no number to go by,
// Events ends with an error wrapping [store.ErrHistoryGap]. An entry
// missing while the one before it is still there was deleted (XDEL), not
// trimmed under the replay: the replay passes over it rather than fail
// on it every time.
func (s *Store) Replay(ctx context.Context, lastEventID string) (store.Backlog, error) {
	if s.closed() {
		return store.Backlog{}, ErrClosed
	}
	arg := lastEventID
	if arg == store.Earliest {
		arg = ""
	}
	res, err := call(s, ctx, func(ctx context.Context) ([]string, error) {
		return s.replayScript.Run(ctx, s.rdb, []string{s.stream, s.ids, s.vanished}, arg).StringSlice()
	})
	if err != nil {
		return store.Backlog{}, fmt.Errorf("redisstore: replay: %w", err)
	}
	if len(res) != 4 {
		return store.Backlog{}, fmt.Errorf("redisstore: unexpected replay reply %q", res)
	}
	b := store.Backlog{Cursor: store.Earliest}
	head := res[0]
	if head == "" {
		b.Events = func(func(*store.Event, error) bool) {}
		return b, nil
	}
	if b.Head, err = parseID(head); err != nil {
		return store.Backlog{}, err
	}
	r := replayer{s: s, ctx: ctx, head: head, pos: res[1]}
	if res[2] != "" {
		b.Cursor, r.pos, r.passed = lastEventID, res[2], true
		r.n, _ = strconv.ParseUint(res[3], 10, 64)
	}
	b.Events = r.events
	return b, nil
}

// replayer reads a backlog from the stream. Its events method works on
// a copy, so that every range over Events starts afresh.
type replayer struct {
	s    *Store
	ctx  context.Context
	head string // the last entry to read
	// pos is the entry the next page starts from: the last one passed,
	// or the first to read when passed is false.
	pos    string
	passed bool
	n      uint64 // the number of the last numbered entry passed, 0 if none
	// check is set once pos was trimmed: entries after n's may have gone
	// with it, unless the next numbered entry is n+1.
	check bool
}

func (r replayer) events(yield func(*store.Event, error) bool) {
	gap := func() {
		yield(nil, fmt.Errorf("redisstore: replay at entry %s: %w", r.pos, store.ErrHistoryGap))
	}
	for !r.passed || r.pos != r.head {
		msgs, full, err := r.s.page(r.ctx, r.pos, r.head, r.passed)
		if err != nil {
			yield(nil, fmt.Errorf("redisstore: replay: %w", err))
			return
		}
		switch {
		case len(msgs) > 0 && msgs[0].ID == r.pos:
			if r.passed {
				msgs = msgs[1:]
			}
		case !r.passed || r.n == 0:
			// The first entry of an Earliest replay is gone, or there is
			// no number to tell what went with pos.
			gap()
			return
		default:
			r.check = true
		}
		for _, m := range msgs {
			r.pos, r.passed = m.ID, true
			if n := number(m); n != 0 {
				if r.check && n != r.n+1 {
					gap()
					return
				}
				r.n, r.check = n, false
			}
			e, err := decode(m)
			if err != nil {
				continue // not written by a Store: skipped, as by the feed
			}
			if !yield(e, nil) {
				return
			}
		}
		if !full {
			break // every entry up to head was read
		}
	}
	if r.check {
		gap() // entries went with pos, and no number tells which
	}
}

// page reads the entries from the one with id from on, up to head: at
// most replayPage+1 entries and about pageBytes (see pageLua). With
// passed, entry from was yielded already: it comes with its id alone.
// full tells whether entries up to head may follow.
func (s *Store) page(ctx context.Context, from, head string, passed bool) (msgs []redis.XMessage, full bool, err error) {
	res, err := call(s, ctx, func(ctx context.Context) ([]any, error) {
		return s.pageScript.Run(ctx, s.rdb, []string{s.stream}, from, head, replayPage+1, pageBytes, passed).Slice()
	})
	if err != nil {
		return nil, false, err
	}
	if len(res) == 0 {
		return nil, false, fmt.Errorf("unexpected page reply %v", res)
	}
	msgs = make([]redis.XMessage, 0, len(res)-1)
	for _, v := range res[1:] {
		m, ok := message(v)
		if !ok {
			return nil, false, fmt.Errorf("unexpected page entry %v", v)
		}
		msgs = append(msgs, m)
	}
	return msgs, res[0] == int64(1), nil
}

// message converts an entry of a script's reply, {id, {field, value, …}}.
func message(v any) (redis.XMessage, bool) {
	e, ok := v.([]any)
	if !ok || len(e) != 2 {
		return redis.XMessage{}, false
	}
	id, ok1 := e[0].(string)
	fields, ok2 := e[1].([]any)
	if !ok1 || !ok2 {
		return redis.XMessage{}, false
	}
	m := redis.XMessage{ID: id, Values: make(map[string]any, len(fields)/2)}
	for i := 0; i+1 < len(fields); i += 2 {
		if k, ok := fields[i].(string); ok {
			m.Values[k] = fields[i+1]
		}
	}
	return m, true
}

// slack is how far the stream may exceed its maximum length before the
// append script trims it.
func (s *Store) slack() int64 { return min(max(s.cfg.maxLen/64, 1), 100) }

// call runs one Redis call bounded by the store's timeout.
func call[T any](s *Store, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	v, err := f(ctx)
	s.failed(err)
	return v, err
}

// failed has a cluster client that a call failed on read the cluster's
// layout again: go-redis does so when a node redirects it (MOVED), not
// when a dead primary refuses its connections, and otherwise only every
// ClusterStateReloadInterval (a minute by default), sending every call
// to the dead primary until then. The reload runs in the background,
// once for many failures.
func (s *Store) failed(err error) {
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		c.ReloadState(context.Background())
	}
}

// Listen implements [store.Store]. l's functions are called from the
// store's reader goroutine: l.Event one event at a time in Seq order,
// l.Status when the reader loses Redis and when it is back. Events this
// Store appended before Listen was called are not passed to l.Event. A
// listener added during an outage is told at once.
func (s *Store) Listen(ml store.Listener) (cancel func()) {
	return s.listeners.Add(ml)
}

// readLoop feeds the listeners from the stream, starting after the entry
// id last, the next entry being numbered n+1. On errors it retries with
// backoff and resumes after the last entry it delivered. Numbers that do
// not follow each other reveal entries trimmed before the loop could read
// them, or a stream that Redis lost: the listeners are told of the gap.
//
// After an error, every second, and on a number seen before, it checks
// that the stream still holds the last entry it delivered (see verify):
// a failover to a replica that lacked it, or a server restarted without
// its data, rewinds the history, which the listeners are told of before
// any entry of the new one. go-redis may retry a read on the new primary
// without the loop seeing an error: the check every second covers that.
func (s *Store) readLoop(last string, n uint64) {
	defer s.wg.Done()
	backoff := minBackoff
	count := int64(readCount)
	verify, checked := false, time.Now()
	for !s.closed() {
		var err error
		if verify || time.Since(checked) >= checkEvery {
			if last, n, err = s.verify(last, n); err == nil {
				verify, checked = false, time.Now()
			}
		}
		var res []redis.XStream
		if err == nil {
			res, err = s.read(last, count)
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			// The reply may have been too large to arrive in time (big
			// events on a slow link): ask for fewer next time.
			count = max(count/4, 1)
		} else {
			count = min(2*count, readCount)
		}
		if errors.Is(err, redis.Nil) {
			backoff = minBackoff
			s.listeners.Status(nil)
			continue // the block timed out
		}
		if err != nil {
			if s.closed() {
				return
			}
			verify = true
			s.listeners.Status(err)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			backoff = nextBackoff(backoff)
			continue
		}
		backoff = minBackoff
		s.listeners.Status(nil)
		last, n = s.deliver(res, last, n)
	}
}

// checkEvery is how often the feed checks that the stream still holds
// the last entry it delivered, when nothing else made it check.
const checkEvery = time.Second

// read reads the entries after last, blocking up to block.
func (s *Store) read(last string, count int64) ([]redis.XStream, error) {
	// A read that outlasts its block by the store's timeout means Redis
	// stopped answering (with ContextTimeoutEnabled; go-redis waits 10 s
	// otherwise).
	ctx, cancel := context.WithTimeout(s.ctx, block+s.cfg.timeout)
	defer cancel()
	res, err := s.rdb.XRead(ctx, &redis.XReadArgs{
		Streams: []string{s.stream, last},
		Count:   count,
		Block:   block,
	}).Result()
	s.failed(err)
	return res, err
}

// deliver passes the entries of res to the listeners, after last
// (numbered n), and returns the last entry passed and its number. An
// entry numbered as one passed before comes from a history that lost
// entries: once verify confirms it, deliver passes no more of res, which
// the rewind covers.
func (s *Store) deliver(res []redis.XStream, last string, n uint64) (string, uint64) {
	for _, st := range res {
		for _, m := range st.Messages {
			next := number(m)
			if next != 0 && next <= n {
				l, k, err := s.verify(last, n)
				if err == nil && l != last {
					return l, k
				}
			}
			last = m.ID
			if next != 0 {
				if next != n+1 {
					s.listeners.Gap()
				}
				n = next
			}
			e, err := decode(m)
			if err != nil {
				// An entry written by something else than a Store:
				// skip it rather than stall the feed.
				continue
			}
			s.latest.Seen(e.Seq, e.ID)
			s.passed.Add(e.Seq, e.ID, e.Time)
			s.listeners.Deliver(e)
		}
	}
	return last, n
}

// checkLua tells whether the stream holds the entry ARGV[1] (1 or 0),
// and returns the id of its first entry, the id, update id and number of
// the last entry not after ARGV[1], and the counter ("" for what is
// missing).
//
// KEYS: stream, counter.
const checkLua = `
local held = 0
if ARGV[1] ~= '0-0' and #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) > 0 then held = 1 end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local f, p, id, n = '', '', '', ''
if #first > 0 then f = first[1][1] end
if ARGV[1] ~= '0-0' then
  local prev = redis.call('XREVRANGE', KEYS[1], ARGV[1], '-', 'COUNT', 1)
  if #prev > 0 then
    p = prev[1][1]
    local fields = prev[1][2]
    for i = 1, #fields - 1, 2 do
      if fields[i] == 'i' then id = fields[i + 1] elseif fields[i] == 'n' then n = fields[i + 1] end
    end
  end
end
return {held, f, p, id, n, redis.call('GET', KEYS[2]) or ''}
`

// verify checks that the stream still holds the entry last, the last one
// the feed passed on (numbered n; "0-0" for none), and returns where the
// feed goes on from: last and n again or, when the history lost it, the
// last entry before it that the stream holds (the end of what the old
// and the new history share), after telling the listeners that the
// history was rewound to it (see [store.Listener]): the feed then passes
// what the new history added. Retention only removes entries before the
// first one, and never lowers the counter: a last entry before the first
// one, with a counter not behind n, was trimmed.
func (s *Store) verify(last string, n uint64) (string, uint64, error) {
	res, err := call(s, s.ctx, func(ctx context.Context) ([]any, error) {
		return s.checkScript.Run(ctx, s.rdb, []string{s.stream, s.counter}, last).Slice()
	})
	if err != nil {
		return last, n, err
	}
	if len(res) != 6 {
		return last, n, fmt.Errorf("redisstore: unexpected check reply %v", res)
	}
	held := res[0] == int64(1)
	first, prev, id := str(res[1]), str(res[2]), str(res[3])
	number, _ := strconv.ParseUint(str(res[4]), 10, 64)
	counter, _ := strconv.ParseUint(str(res[5]), 10, 64)
	trimmed := last != "0-0" && (first == "" || before(last, first))
	if held || (counter >= n && (last == "0-0" || trimmed)) {
		return last, n, nil
	}
	var seq uint64
	if prev == "" {
		prev, id = "0-0", store.Earliest // as store.Listener says of an empty history
	} else if seq, err = parseID(prev); err != nil {
		return last, n, err
	}
	// The ids of the events that vanished are unknown cursors from now
	// on, before any stream ends for the rewind: a client that got one
	// and resumes with it must not resume after a retry of its update
	// that the new primary recorded later, past updates it never got.
	if err := s.bury(s.passed.After(seq)); err != nil {
		return last, n, err
	}
	s.passed.Forget(seq)
	s.latest.Rewind(seq, id)
	s.listeners.Rewind(seq, id)
	return prev, number, nil
}

// vanishedTTL is how long the ids of events a failover lost stay unknown
// cursors: far longer than a client takes to resume.
const vanishedTTL = 24 * time.Hour

// bury records the ids of events that vanished (see verify).
func (s *Store) bury(events []store.PassedEvent) error {
	if len(events) == 0 {
		return nil
	}
	members := make([]any, len(events))
	for i, e := range events {
		members[i] = e.ID
	}
	_, err := call(s, s.ctx, func(ctx context.Context) ([]redis.Cmder, error) {
		return s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.SAdd(ctx, s.vanished, members...)
			p.Expire(ctx, s.vanished, vanishedTTL)
			return nil
		})
	})
	return err
}

func str(v any) string { s, _ := v.(string); return s }

// before tells whether stream id a comes before stream id b; a malformed
// id comes before none.
func before(a, b string) bool {
	sa, err1 := parseID(a)
	sb, err2 := parseID(b)
	return err1 == nil && err2 == nil && sa < sb
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

func decode(m redis.XMessage) (*store.Event, error) {
	seq, err := parseID(m.ID)
	if err != nil {
		return nil, err
	}
	v, ok := m.Values[field].(string)
	if !ok {
		return nil, fmt.Errorf("redisstore: entry %s: no field %q", m.ID, field)
	}
	e := &store.Event{Seq: seq}
	if err := store.UnmarshalEvent([]byte(v), e); err != nil {
		return nil, fmt.Errorf("redisstore: entry %s: %w", m.ID, err)
	}
	return e, nil
}

// nextBackoff is the wait after one more failed attempt that followed a
// wait of d.
func nextBackoff(d time.Duration) time.Duration { return min(2*d, maxBackoff) }
