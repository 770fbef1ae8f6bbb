package postgres

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

//go:embed query/run_prune.sql
var runPruneSQL string

// PruneRuns deletes up to p.Limit runs of every tenant (as the owner) that
// ended before p.Before, the earliest ended first, with everything they
// own, in one statement.
func (s *Store) PruneRuns(ctx context.Context, p store.PruneRunsParams) (int, error) {
	if p.Limit <= 0 {
		return 0, nil
	}
	var n int
	if err := s.pool.QueryRow(ctx, runPruneSQL, namedArgs{"before": sqlrow.Nanos(p.Before), "limit": p.Limit}).Scan(&n); err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	return n, nil
}
