package belay

import (
	"context"
	"time"

	"github.com/belayrun/belay/store"
)

const (
	// pruneBatch is how many ended runs one prune deletes: one short
	// transaction beside the workers' writes.
	pruneBatch = 200
	// pruneEvery is how often the claim loop prunes when the last batch
	// was not full.
	pruneEvery = time.Minute
)

// retention deletes the runs that ended longer ago than Config.KeepEnded.
// Every runtime sharing a store prunes; each batch is a transaction of its
// own, so they only share the work.
type retention struct {
	last time.Time
	// more is set when the last batch was full: there may be more to
	// delete, and the next sweep (5 PollIntervals on) goes on.
	more bool
}

// prune deletes one batch if it is time to.
func (p *retention) prune(ctx context.Context, s store.Store, now time.Time, keep time.Duration) error {
	if keep == 0 || !p.more && now.Sub(p.last) < pruneEvery {
		return nil
	}
	p.last = now
	n, err := s.PruneRuns(ctx, store.PruneRunsParams{Before: now.Add(-keep), Limit: pruneBatch})
	p.more = err == nil && n == pruneBatch
	return err
}
