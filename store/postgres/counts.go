package postgres

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

// Counts counts runs by status and pending approvals, over every tenant (as
// the owner).
func (s *Store) Counts(ctx context.Context) (store.Counts, error) {
	c := store.Counts{Runs: map[store.Status]int64{}}
	rows, err := s.pool.Query(ctx, countsRunsSQL)
	if err != nil {
		return c, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	runs, err := sqlrow.StatusCounts(rows)
	if err != nil {
		return c, fmt.Errorf("count runs: %w", err)
	}
	c.Runs = runs
	if err := s.pool.QueryRow(ctx, countsApprovalsSQL).Scan(&c.PendingApprovals); err != nil {
		return c, fmt.Errorf("count approvals: %w", err)
	}
	return c, nil
}

//go:embed query/schema_size.sql
var schemaSizeSQL string

// Size returns the bytes Belay's tables take in the database, with their
// indexes: what its schema costs the server's disk.
func (s *Store) Size(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, schemaSizeSQL, namedArgs{"schema": s.schema}).Scan(&n); err != nil {
		return 0, fmt.Errorf("schema size: %w", err)
	}
	return n, nil
}
