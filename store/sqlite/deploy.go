package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	_ "embed"

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
// its events, in one write.
func (s *Store) MoveVersion(ctx context.Context, p store.MoveVersionParams) error {
	trace := eventsEntry(p.Now, p.Events)
	err := s.writer.do(ctx, eventBytes(p.Events), func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, runMoveVersionSQL,
			sql.Named("id", p.Fence.RunID),
			sql.Named("owner", p.Fence.Owner),
			sql.Named("epoch", p.Fence.Epoch),
			sql.Named("from", p.From),
			sql.Named("to", p.To),
			sql.Named("events", trace.Events),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return store.ErrLeaseLost
		}
		return appendJournal(ctx, tx, p.Fence.RunID, trace)
	})
	if err != nil {
		return fmt.Errorf("move run %s from version %s to %s: %w", p.Fence.RunID, p.From, p.To, err)
	}
	return nil
}

// RunsByVersion counts the runs not ended by agent and version.
func (s *Store) RunsByVersion(ctx context.Context) ([]store.VersionCount, error) {
	rows, err := s.read.QueryContext(ctx, countsVersionsSQL)
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
