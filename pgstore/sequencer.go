package pgstore

import (
	"context"
	"errors"
	"sync"
)

// errNotSequenced is the error of an Append whose row a sequencer round
// did not find: deleted by someone else before it had a seq.
var errNotSequenced = errors.New("the event's row is gone")

// sequencer gets the seqs of this store's appends: each Append, once its
// insert has committed, waits here while one goroutine runs sequencer
// rounds for every append waiting. Appends that commit while a round
// runs share the next one, so that a round (one advisory lock, one
// commit) serves many appends, and the appends never queue on the lock
// themselves.
type sequencer struct {
	s       *Store
	mu      sync.Mutex
	pending map[int64]chan seqResult
	wake    chan struct{}
}

type seqResult struct {
	seq uint64
	err error
}

func (q *sequencer) init(s *Store) {
	q.s = s
	q.pending = make(map[int64]chan seqResult)
	q.wake = make(chan struct{}, 1)
}

// wait returns the seq of the committed row with insert id id.
func (q *sequencer) wait(ctx context.Context, id int64) (uint64, error) {
	ch := make(chan seqResult, 1)
	q.mu.Lock()
	if q.s.closed() {
		q.mu.Unlock()
		return 0, ErrClosed
	}
	q.pending[id] = ch
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	select {
	case r := <-ch:
		return r.seq, r.err
	case <-ctx.Done():
		q.mu.Lock()
		delete(q.pending, id)
		q.mu.Unlock()
		return 0, ctx.Err()
	}
}

// run runs rounds while appends wait, until the store closes.
func (q *sequencer) run() {
	defer q.s.wg.Done()
	for {
		select {
		case <-q.wake:
		case <-q.s.ctx.Done():
			q.mu.Lock()
			for id, ch := range q.pending {
				ch <- seqResult{err: ErrClosed}
				delete(q.pending, id)
			}
			q.mu.Unlock()
			return
		}
		for q.round() {
		}
	}
}

// round runs one sequencer round for the appends waiting and reports
// whether some are still waiting.
func (q *sequencer) round() bool {
	q.mu.Lock()
	ids := make([]int64, 0, len(q.pending))
	for id := range q.pending {
		ids = append(ids, id)
	}
	q.mu.Unlock()
	if len(ids) == 0 {
		return false
	}
	s := q.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.timeout)
	defer cancel()
	seqs := make(map[int64]uint64, len(ids))
	rows, err := s.pool.Query(ctx, s.n.sequence, seqBatch, ids, s.cfg.maxEvents)
	if err == nil {
		for rows.Next() {
			var id, seq int64
			if err = rows.Scan(&id, &seq); err != nil {
				break
			}
			seqs[id] = uint64(seq)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		ch, ok := q.pending[id]
		if !ok {
			continue // its Append gave up
		}
		switch seq, found := seqs[id]; {
		case err != nil:
			ch <- seqResult{err: err}
		case found:
			ch <- seqResult{seq: seq}
		case len(seqs) == 0:
			// A round stamps every committed row, up to seqBatch of
			// them, and these were committed before it began: if none
			// got a seq, this one is not there to get one.
			ch <- seqResult{err: errNotSequenced}
		default:
			continue // past seqBatch rows: the next round
		}
		delete(q.pending, id)
	}
	return len(q.pending) > 0
}
