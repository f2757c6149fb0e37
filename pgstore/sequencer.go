package pgstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxBatch bounds the appends one insert statement takes.
const maxBatch = 1000

// sequencer records this store's appends and gets their seqs, in one
// goroutine: it takes every append waiting and records them all with one
// statement that numbers them under the sequencer's lock (group commit).
// Appends that arrive meanwhile make the next batch, so that a batch
// costs one statement and one fsync however many appends it holds, and
// appends never queue on the advisory lock themselves.
type sequencer struct {
	s     *Store
	mu    sync.Mutex
	queue []*appendReq
	wake  chan struct{}
}

type appendReq struct {
	id     string
	body   []byte
	digest [32]byte
	at     time.Time
	done   chan seqResult
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
func (q *sequencer) append(ctx context.Context, id string, body []byte, digest [32]byte, at time.Time) (uint64, error) {
	r := &appendReq{id: id, body: body, digest: digest, at: at, done: make(chan seqResult, 1)}
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
		last := 0 // the size of the batch before
		for {
			q.gather(last)
			q.mu.Lock()
			n := min(len(q.queue), maxBatch)
			last = n
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

// gatherWindow bounds how long the sequencer waits for a batch to fill.
const gatherWindow = 300 * time.Microsecond

// gather waits, gatherWindow at most, until as many appends wait as the
// batch before held. Writers that got their answer from a batch append
// again one after the other: without the wait, the next batch would take
// the first few of them, and the rest would wait a whole round (its
// fsync) for the one after, batches alternating small and large. A lone
// writer (a batch of one) never waits.
func (q *sequencer) gather(last int) {
	if last <= 1 {
		return
	}
	deadline := time.Now().Add(gatherWindow)
	for {
		q.mu.Lock()
		n := len(q.queue)
		q.mu.Unlock()
		wait := time.Until(deadline)
		if n >= last || wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-q.wake:
		case <-t.C:
		case <-q.s.ctx.Done():
		}
		t.Stop()
	}
}

// batch records a batch with one call of PFX_append2, which numbers it
// at once, and answers each append: one statement, one transaction and
// one fsync for the whole batch. Appends of the same update (a retry
// racing its first attempt) are sent once, and get the same answer: the
// function recognises retries of what is recorded, not within its batch.
func (q *sequencer) batch(batch []*appendReq) {
	s := q.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	type update struct {
		id     string
		digest [32]byte
	}
	sent := make(map[update]int, len(batch)) // → index in the arrays sent
	of := make([]int, len(batch))            // batch[i] is sent at of[i]
	var ids []string
	var bodies []string
	var ats []time.Time
	var sizes []int32
	var digests [][]byte
	for i, r := range batch {
		u := update{r.id, r.digest}
		j, ok := sent[u]
		if !ok || s.cfg.window == 0 {
			j = len(ids)
			sent[u] = j
			ids, bodies, ats = append(ids, r.id), append(bodies, string(r.body)), append(ats, r.at)
			digests, sizes = append(digests, r.digest[:]), append(sizes, int32(len(r.body)))
		}
		of[i] = j
	}
	seqs := make([]uint64, 0, len(ids))
	err := s.record(ctx, s.n.appendBatch, []any{seqBatch, ids, bodies, ats, sizes, digests, s.cfg.maxEvents, s.cfg.window.Seconds()},
		func(rows pgx.Rows) error {
			for rows.Next() {
				var seq int64
				if err := rows.Scan(&seq); err != nil {
					return err
				}
				seqs = append(seqs, uint64(seq))
			}
			return nil
		})
	if err == nil && len(seqs) != len(ids) {
		err = errors.New("the insert returned a wrong count of rows")
	}
	for i, r := range batch {
		if err != nil {
			r.done <- seqResult{err: err}
		} else {
			// Numbered in the arrays' order (see PFX_append2).
			r.done <- seqResult{seq: seqs[of[i]]}
		}
	}
}
