package postgres

import (
	"context"
	"fmt"
	"time"

	_ "embed"

	"github.com/jackc/pgx/v5"

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

// PutSchedule creates or replaces a schedule.
func (s *Store) PutSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	var stored store.Schedule
	b := s.batch(sc.Tenant)
	b.Queue(schedulePutSQL, namedArgs{
		"tenant": sc.Tenant, "name": sc.Name, "agent": sc.Agent, "spec": sc.Spec, "input": sc.Input,
		"overlap": string(sc.Overlap), "missed": string(sc.Missed), "next_at": sqlrow.Nanos(sc.NextAt),
		"created_by": sc.CreatedBy, "now": sqlrow.Nanos(sc.CreatedAt),
	}).QueryRow(func(row pgx.Row) (err error) {
		stored, err = sqlrow.Schedule(row)
		return err
	})
	if err := s.send(ctx, b); err != nil {
		return store.Schedule{}, fmt.Errorf("put schedule %s: %w", sc.Name, err)
	}
	return stored, nil
}

// Schedules lists a tenant's schedules, every tenant's for "".
func (s *Store) Schedules(ctx context.Context, tenant string) ([]store.Schedule, error) {
	var out []store.Schedule
	b := s.batch(tenant)
	b.Queue(scheduleListSQL, namedArgs{"tenant": tenant}).Query(collect(&out, sqlrow.Schedule))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// DeleteSchedule removes a schedule of a tenant.
func (s *Store) DeleteSchedule(ctx context.Context, tenant, name string) error {
	tag, err := s.pool.Exec(ctx, scheduleDeleteSQL, namedArgs{"tenant": tenant, "name": name})
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, storeError(err))
	}
	return nil
}

// DueSchedules returns the schedules of every tenant due at now.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, agents []string, limit int) ([]store.Schedule, error) {
	var out []store.Schedule
	b := s.batch("")
	b.Queue(scheduleDueSQL, namedArgs{"now": sqlrow.Nanos(now), "all_agents": agents == nil, "agents": agents, "limit": limit}).
		Query(collect(&out, sqlrow.Schedule))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("due schedules: %w", err)
	}
	return out, nil
}

// AdvanceSchedule moves a schedule past a firing if no other worker has.
func (s *Store) AdvanceSchedule(ctx context.Context, p store.AdvanceScheduleParams) (bool, error) {
	tag, err := s.pool.Exec(ctx, scheduleAdvanceSQL, namedArgs{
		"tenant": p.Tenant, "name": p.Name, "from": sqlrow.Nanos(p.From), "next": sqlrow.Nanos(p.Next),
		"run_id": p.RunID, "fired_at": sqlrow.Nanos(p.FiredAt),
	})
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", p.Name, storeError(err))
	}
	return tag.RowsAffected() == 1, nil
}
