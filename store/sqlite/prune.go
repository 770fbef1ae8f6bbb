package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/run_prune_list.sql
	runPruneListSQL string
	//go:embed query/run_prune_owned.sql
	runPruneOwnedSQL string
	//go:embed query/run_prune.sql
	runPruneSQL string
)

// PruneRuns deletes up to p.Limit runs that ended before p.Before, with
// everything they own, in one transaction.
func (s *Store) PruneRuns(ctx context.Context, p store.PruneRunsParams) (int, error) {
	if p.Limit <= 0 {
		return 0, nil
	}
	var pruned int
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		pruned = 0
		type doomed struct {
			id  string
			ref int64
		}
		rows, err := tx.QueryContext(ctx, runPruneListSQL, sql.Named("before", sqlrow.Nanos(p.Before)), sql.Named("limit", p.Limit))
		if err != nil {
			return err
		}
		var runs []doomed
		for rows.Next() {
			var d doomed
			if err := rows.Scan(&d.id, &d.ref); err != nil {
				rows.Close()
				return err
			}
			runs = append(runs, d)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, d := range runs {
			if _, err := tx.ExecContext(ctx, runPruneOwnedSQL, sql.Named("id", d.id), sql.Named("ref", d.ref)); err != nil {
				return fmt.Errorf("run %s: %w", d.id, err)
			}
			res, err := tx.ExecContext(ctx, runPruneSQL, sql.Named("id", d.id))
			if err != nil {
				return fmt.Errorf("run %s: %w", d.id, err)
			}
			// A run that has not ended would leave its rows deleted: the
			// whole prune is undone instead.
			if err := mustAffect(res); err != nil {
				return fmt.Errorf("run %s: %w", d.id, err)
			}
		}
		pruned = len(runs)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	return pruned, nil
}
