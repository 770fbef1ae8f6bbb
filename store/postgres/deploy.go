package postgres

import (
	"context"
	"errors"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/run_move_version.sql
	runMoveVersionSQL string
	//go:embed query/counts_versions.sql
	countsVersionsSQL string
)

var _ store.Deployer = (*Store)(nil)

// MoveVersion moves a run its worker holds to another agent version, with
// its events, in one transaction.
func (s *Store) MoveVersion(ctx context.Context, p store.MoveVersionParams) error {
	b := s.txBatch("")
	b.Queue(runMoveVersionSQL, namedArgs{
		"id": p.Fence.RunID, "owner": p.Fence.Owner, "epoch": p.Fence.Epoch,
		"from": p.From, "to": p.To, "now": sqlrow.Nanos(p.Now),
	}).QueryRow(func(row pgx.Row) error {
		var id string
		if err := row.Scan(&id); errors.Is(err, pgx.ErrNoRows) {
			return store.ErrLeaseLost
		} else if err != nil {
			return err
		}
		return nil
	})
	queueEvents(b, p.Fence.RunID, p.Events)
	if err := s.inTx(ctx, b, nil); err != nil {
		return fmt.Errorf("move run %s from version %s to %s: %w", p.Fence.RunID, p.From, p.To, err)
	}
	return nil
}

// RunsByVersion counts the runs not ended by agent and version, over every
// tenant (as the owner).
func (s *Store) RunsByVersion(ctx context.Context) ([]store.VersionCount, error) {
	rows, err := s.pool.Query(ctx, countsVersionsSQL)
	if err != nil {
		return nil, fmt.Errorf("count runs by version: %w", err)
	}
	defer rows.Close()
	var out []store.VersionCount
	for rows.Next() {
		var c store.VersionCount
		if err := rows.Scan(&c.Agent, &c.Version, &c.Runs); err != nil {
			return nil, fmt.Errorf("count runs by version: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count runs by version: %w", err)
	}
	return out, nil
}
