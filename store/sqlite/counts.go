package sqlite

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/counts_runs.sql
	countsRunsSQL string
	//go:embed query/counts_approvals.sql
	countsApprovalsSQL string
)

// Counts counts runs by status and pending approvals.
func (s *Store) Counts(ctx context.Context) (store.Counts, error) {
	c := store.Counts{Runs: map[store.Status]int64{}}
	rows, err := s.read.QueryContext(ctx, countsRunsSQL)
	if err != nil {
		return c, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	runs, err := sqlrow.StatusCounts(rows)
	if err != nil {
		return c, fmt.Errorf("count runs: %w", err)
	}
	c.Runs = runs
	if err := s.read.QueryRowContext(ctx, countsApprovalsSQL).Scan(&c.PendingApprovals); err != nil {
		return c, fmt.Errorf("count approvals: %w", err)
	}
	return c, nil
}
