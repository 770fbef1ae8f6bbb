package store

import (
	"context"
	"time"
)

// Schedules: runs started on a cron spec. The store keeps each schedule
// and its next firing; workers fire the due ones (see the root package's
// schedules.go), and a firing's run has a client request id derived from
// the schedule and the firing's time, so it runs once however many workers
// see it.

// OverlapPolicy says what a firing does while the run of the schedule's
// previous firing has not ended.
type OverlapPolicy string

const (
	// OverlapSkip drops the firing.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapQueue holds the firing back until the previous run ends, then
	// starts it.
	OverlapQueue OverlapPolicy = "queue"
	// OverlapAllow starts the firing's run beside the previous one.
	OverlapAllow OverlapPolicy = "allow"
)

// MissedPolicy says what becomes of firings whose time passed while no
// worker ran (downtime).
type MissedPolicy string

const (
	// MissedSkip drops them: the schedule goes on from its next firing.
	MissedSkip MissedPolicy = "skip"
	// MissedRunOnce starts one run for all of them, then goes on.
	MissedRunOnce MissedPolicy = "run_once"
)

// Schedule starts a run of an agent on a cron spec.
type Schedule struct {
	Tenant string
	// Name is unique in its tenant.
	Name  string
	Agent string
	// Spec is a five-field cron spec (minute hour day-of-month month
	// day-of-week), or a descriptor such as "@hourly".
	Spec string
	// Input is each run's input.
	Input   string
	Overlap OverlapPolicy
	Missed  MissedPolicy
	// NextAt is the earliest firing not yet handled: the schedule is due
	// once it has passed.
	NextAt time.Time
	// LastRunID is the run of the latest firing that started one, and
	// LastFiredAt that firing's time; empty before any.
	LastRunID   string
	LastFiredAt time.Time
	CreatedBy   string
	CreatedAt   time.Time
}

// AdvanceScheduleParams moves a schedule past a firing.
type AdvanceScheduleParams struct {
	Tenant string
	Name   string
	// From is the NextAt the caller read: the schedule moves only if it
	// still holds it, so of two workers that handled the same firing one
	// moves it.
	From time.Time
	Next time.Time
	// RunID and FiredAt record the firing's run; empty when the firing
	// started none.
	RunID   string
	FiredAt time.Time
}

// Scheduler is a store that keeps schedules. Both drivers are.
type Scheduler interface {
	// PutSchedule creates a schedule, or replaces the one of its tenant
	// and name, keeping the record of its last run and, if the spec is
	// the same, its NextAt: a firing not yet handled is not lost to the
	// put. It returns the schedule as stored.
	PutSchedule(ctx context.Context, s Schedule) (Schedule, error)
	// Schedules lists a tenant's schedules (every tenant's for "") by
	// tenant and name.
	Schedules(ctx context.Context, tenant string) ([]Schedule, error)
	// DeleteSchedule removes a schedule; one that is not in the tenant
	// is ErrNotFound.
	DeleteSchedule(ctx context.Context, tenant, name string) error
	// DueSchedules returns up to limit schedules of every tenant whose
	// NextAt is not after now, the longest due first, of the agents named
	// (of every agent for nil): a worker asks for the schedules it can
	// fire, so that those of agents it does not run never crowd them out.
	DueSchedules(ctx context.Context, now time.Time, agents []string, limit int) ([]Schedule, error)
	// AdvanceSchedule sets a schedule's NextAt to p.Next if it still is
	// p.From, recording p.RunID if set, and reports whether it did.
	AdvanceSchedule(ctx context.Context, p AdvanceScheduleParams) (bool, error)
}
