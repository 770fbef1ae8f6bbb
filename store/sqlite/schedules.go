package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/schedule_put.sql
	schedulePutSQL string
	//go:embed query/schedule_list.sql
	scheduleListSQL string
	//go:embed query/schedule_delete.sql
	scheduleDeleteSQL string
	//go:embed query/schedule_due.sql
	scheduleDueSQL string
	//go:embed query/schedule_advance.sql
	scheduleAdvanceSQL string
)

var _ store.Scheduler = (*Store)(nil)

// PutSchedule creates or replaces a schedule in the writer's transaction.
func (s *Store) PutSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	var stored store.Schedule
	err := s.writer.do(ctx, int64(len(sc.Input)), func(ctx context.Context, tx *writeTx) (err error) {
		stored, err = sqlrow.Schedule(tx.QueryRowContext(ctx, schedulePutSQL,
			sql.Named("tenant", sc.Tenant), sql.Named("name", sc.Name), sql.Named("agent", sc.Agent),
			sql.Named("spec", sc.Spec), sql.Named("input", sc.Input), sql.Named("overlap", string(sc.Overlap)),
			sql.Named("missed", string(sc.Missed)), sql.Named("next_at", sqlrow.Nanos(sc.NextAt)),
			sql.Named("created_by", sc.CreatedBy), sql.Named("now", sqlrow.Nanos(sc.CreatedAt))))
		return err
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("put schedule %s: %w", sc.Name, err)
	}
	return stored, nil
}

// Schedules lists a tenant's schedules, every tenant's for "".
func (s *Store) Schedules(ctx context.Context, tenant string) ([]store.Schedule, error) {
	out, err := readAll(ctx, s.read, sqlrow.Schedule, scheduleListSQL, sql.Named("tenant", tenant))
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// DeleteSchedule removes a schedule of a tenant.
func (s *Store) DeleteSchedule(ctx context.Context, tenant, name string) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, scheduleDeleteSQL, sql.Named("tenant", tenant), sql.Named("name", name))
		if err != nil {
			return err
		}
		return mustFind(res)
	})
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, err)
	}
	return nil
}

// DueSchedules returns the schedules of every tenant due at now.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, agents []string, limit int) ([]store.Schedule, error) {
	names, err := json.Marshal(agents)
	if err != nil {
		return nil, fmt.Errorf("due schedules: %w", err)
	}
	out, err := readAll(ctx, s.read, sqlrow.Schedule, scheduleDueSQL, sql.Named("now", sqlrow.Nanos(now)),
		sql.Named("all_agents", agents == nil), sql.Named("agents", string(names)), sql.Named("limit", limit))
	if err != nil {
		return nil, fmt.Errorf("due schedules: %w", err)
	}
	return out, nil
}

// AdvanceSchedule moves a schedule past a firing if no other worker has.
func (s *Store) AdvanceSchedule(ctx context.Context, p store.AdvanceScheduleParams) (bool, error) {
	var n int64
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, scheduleAdvanceSQL,
			sql.Named("tenant", p.Tenant), sql.Named("name", p.Name), sql.Named("from", sqlrow.Nanos(p.From)),
			sql.Named("next", sqlrow.Nanos(p.Next)), sql.Named("run_id", p.RunID), sql.Named("fired_at", sqlrow.Nanos(p.FiredAt)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", p.Name, err)
	}
	return n == 1, nil
}
