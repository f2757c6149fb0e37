package pgstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// errNotSequenced is the error of an Append whose row a sequencer round
// did not find: deleted by someone else before it had a seq.
var errNotSequenced = errors.New("the event's row is gone")

// maxBatch bounds the appends one insert statement takes.
const maxBatch = 1000

// sequencer records this store's appends and gets their seqs, in one
// goroutine: it takes every append waiting, inserts them all in one
// statement (group commit), then runs sequencer rounds until each has its
// seq. Appends that arrive meanwhile make the next batch, so that a batch
// costs two statements and one fsync however many appends it holds, and
// appends never queue on the advisory lock themselves.
type sequencer struct {
	s     *Store
	mu    sync.Mutex
	queue []*appendReq
	wake  chan struct{}
}

type appendReq struct {
	id   string
	body []byte
	at   time.Time
	row  int64 // insert id, once inserted
	done chan seqResult
	// gone is set when the Append gave up before its batch was taken:
	// its event is then not inserted at all.
	gone atomic.Bool
}

type seqResult struct {
	seq uint64
	err error
}

func (q *sequencer) init(s *Store) {
	q.s = s
	q.wake = make(chan struct{}, 1)
}

// append records an event and returns its seq. When ctx ends first, the
// event is not recorded if its batch was not taken yet, and may be if it
// was.
func (q *sequencer) append(ctx context.Context, id string, body []byte, at time.Time) (uint64, error) {
	r := &appendReq{id: id, body: body, at: at, done: make(chan seqResult, 1)}
	q.mu.Lock()
	if q.s.closed() {
		q.mu.Unlock()
		return 0, ErrClosed
	}
	q.queue = append(q.queue, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	select {
	case res := <-r.done:
		return res.seq, res.err
	case <-ctx.Done():
		r.gone.Store(true)
		return 0, ctx.Err()
	}
}

// run records batches while appends wait, until the store closes.
func (q *sequencer) run() {
	defer q.s.wg.Done()
	for {
		select {
		case <-q.wake:
		case <-q.s.ctx.Done():
			q.mu.Lock()
			for _, r := range q.queue {
				r.done <- seqResult{err: ErrClosed}
			}
			q.queue = nil
			q.mu.Unlock()
			return
		}
		for {
			q.mu.Lock()
			n := min(len(q.queue), maxBatch)
			batch := slices.DeleteFunc(slices.Clone(q.queue[:n]), func(r *appendReq) bool { return r.gone.Load() })
			q.queue = q.queue[n:]
			q.mu.Unlock()
			if n == 0 {
				break
			}
			if len(batch) > 0 {
				q.batch(batch)
			}
		}
	}
}

// batch inserts a batch and sequences it, answering each append.
func (q *sequencer) batch(batch []*appendReq) {
	s := q.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	fail := func(reqs []*appendReq, err error) {
		for _, r := range reqs {
			r.done <- seqResult{err: err}
		}
	}
	ids := make([]string, len(batch))
	bodies := make([]string, len(batch))
	ats := make([]time.Time, len(batch))
	for i, r := range batch {
		ids[i], bodies[i], ats[i] = r.id, string(r.body), r.at
	}
	rows, err := s.pool.Query(ctx, s.n.insertBatch, ids, bodies, ats)
	var rowIDs []int64
	if err == nil {
		for rows.Next() {
			var id int64
			if err = rows.Scan(&id); err != nil {
				break
			}
			rowIDs = append(rowIDs, id)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err == nil && len(rowIDs) != len(batch) {
		err = errors.New("the insert returned a wrong count of rows")
	}
	if err != nil {
		fail(batch, err)
		return
	}
	// Insert ids are drawn in the order of the rows inserted, which is
	// the batch's (see insertBatch).
	slices.Sort(rowIDs)
	pending := make(map[int64]*appendReq, len(batch))
	for i, r := range batch {
		r.row = rowIDs[i]
		pending[r.row] = r
	}
	for len(pending) > 0 {
		seqs, err := q.round(ctx, pending)
		if err != nil {
			fail(mapValues(pending), err)
			return
		}
		if len(seqs) == 0 {
			// A round stamps every committed row, up to seqBatch of
			// them, and these were committed before it began: if none
			// got a seq, they are not there to get one.
			fail(mapValues(pending), errNotSequenced)
			return
		}
		for row, seq := range seqs {
			if r, ok := pending[row]; ok {
				r.done <- seqResult{seq: seq}
				delete(pending, row)
			}
		}
	}
}

func mapValues(m map[int64]*appendReq) []*appendReq {
	out := make([]*appendReq, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return out
}

// round runs one sequencer round and returns the seqs of the pending
// rows that have one.
func (q *sequencer) round(ctx context.Context, pending map[int64]*appendReq) (map[int64]uint64, error) {
	s := q.s
	rows := make([]int64, 0, len(pending))
	for row := range pending {
		rows = append(rows, row)
	}
	res, err := s.pool.Query(ctx, s.n.sequence, seqBatch, rows, s.cfg.maxEvents)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	seqs := make(map[int64]uint64, len(rows))
	for res.Next() {
		var row, seq int64
		if err := res.Scan(&row, &seq); err != nil {
			return nil, err
		}
		seqs[row] = uint64(seq)
	}
	return seqs, res.Err()
}
