package belay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/internal/cronspec"
	"github.com/belayrun/belay/store"
)

// Schedules start runs on a cron spec. The store keeps each schedule and
// its next firing; every worker's sweep fires the due schedules of the
// agents it runs. A firing's run has a client request id derived from the
// schedule and the firing's time, and run creation is idempotent per
// tenant, user and request id, so a firing runs once however many workers
// see it; the schedule then moves on by a compare-and-set of its next
// firing. The cron parser lives in internal/cronspec.

// ErrSchedulesUnsupported is returned on a store that keeps no schedules.
var ErrSchedulesUnsupported = errors.New("this store keeps no schedules: schedules need the SQLite or PostgreSQL store")

// ErrInvalidSchedule wraps what is wrong with a schedule AddSchedule
// refuses; its message says what to do.
var ErrInvalidSchedule = errors.New("invalid schedule")

// ScheduleGrace is how late a worker may fire a firing before it counts as
// missed (its time passed while no worker ran): the missed-firing policy
// decides whether it still starts a run.
const ScheduleGrace = time.Minute

// ScheduleRequest is a schedule to create or replace.
type ScheduleRequest struct {
	// Name is unique in its tenant: letters, digits, '.', '_' and '-', up
	// to 64. Required.
	Name string
	// Tenant owns the schedule and its runs. Default DefaultTenant.
	Tenant string
	// Agent names the agent whose runs the schedule starts. Required; the
	// workers that run that agent fire the schedule.
	Agent string
	// Cron is a five-field spec (minute hour day-of-month month
	// day-of-week) in UTC, or a descriptor such as @hourly. Required.
	Cron string
	// Input is each run's input. Required.
	Input string
	// Overlap is what a firing does while the previous firing's run has
	// not ended. Default store.OverlapSkip.
	Overlap store.OverlapPolicy
	// Missed is what becomes of firings missed during downtime. Default
	// store.MissedRunOnce.
	Missed store.MissedPolicy
	// By names who made the schedule.
	By string
}

var scheduleName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// AddSchedule creates a schedule, or replaces the one of its tenant and
// name; its first firing is the spec's first after now, unless it replaces
// one with the same spec, whose next firing it keeps (a firing missed while
// no worker ran still follows the missed policy after a restart that adds
// the schedules of belay.yaml again).
func (op *Operator) AddSchedule(ctx context.Context, req ScheduleRequest) (store.Schedule, error) {
	sch, ok := op.store.(store.Scheduler)
	if !ok {
		return store.Schedule{}, ErrSchedulesUnsupported
	}
	if req.Tenant == "" {
		req.Tenant = DefaultTenant
	}
	if req.Overlap == "" {
		req.Overlap = store.OverlapSkip
	}
	if req.Missed == "" {
		req.Missed = store.MissedRunOnce
	}
	var problems []string
	if !scheduleName.MatchString(req.Name) {
		problems = append(problems, fmt.Sprintf("name %q: use letters, digits, '.', '_' and '-', up to 64 (e.g. nightly-report)", req.Name))
	}
	if req.Agent == "" {
		problems = append(problems, "no agent: name the agent whose runs the schedule starts")
	}
	if strings.TrimSpace(req.Input) == "" {
		problems = append(problems, "no input: give each run's input")
	}
	switch req.Overlap {
	case store.OverlapSkip, store.OverlapQueue, store.OverlapAllow:
	default:
		problems = append(problems, fmt.Sprintf("overlap %q: want skip, queue or allow", req.Overlap))
	}
	switch req.Missed {
	case store.MissedSkip, store.MissedRunOnce:
	default:
		problems = append(problems, fmt.Sprintf("missed %q: want skip or run_once", req.Missed))
	}
	spec, err := cronspec.Parse(req.Cron)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return store.Schedule{}, fmt.Errorf("%w: %s", ErrInvalidSchedule, strings.Join(problems, "; "))
	}
	now := op.now()
	s := store.Schedule{Tenant: req.Tenant, Name: req.Name, Agent: req.Agent, Spec: req.Cron, Input: req.Input,
		Overlap: req.Overlap, Missed: req.Missed, NextAt: spec.Next(now), CreatedBy: req.By, CreatedAt: now}
	if s.NextAt.IsZero() {
		return store.Schedule{}, fmt.Errorf("%w: cron spec %q never fires; want e.g. %s", ErrInvalidSchedule, req.Cron, cronspec.Example)
	}
	stored, err := sch.PutSchedule(ctx, s)
	if err != nil {
		return store.Schedule{}, fmt.Errorf("schedule: %w", err)
	}
	op.done()
	return stored, nil
}

// Schedules lists a tenant's schedules (AnyTenant: every tenant's), by
// tenant and name.
func (op *Operator) Schedules(ctx context.Context, tenant string) ([]store.Schedule, error) {
	sch, ok := op.store.(store.Scheduler)
	if !ok {
		return nil, ErrSchedulesUnsupported
	}
	return sch.Schedules(ctx, tenant)
}

// RemoveSchedule removes a schedule; its runs stay. One not in the tenant
// is store.ErrNotFound.
func (op *Operator) RemoveSchedule(ctx context.Context, tenant, name string) error {
	sch, ok := op.store.(store.Scheduler)
	if !ok {
		return ErrSchedulesUnsupported
	}
	return sch.DeleteSchedule(ctx, tenant, name)
}

// ScheduleRequestID is the client request id of a schedule's run for one
// firing: the same for every worker that fires it.
func ScheduleRequestID(name string, firing time.Time) string {
	return "schedule:" + name + ":" + firing.UTC().Format(time.RFC3339)
}

// fireSchedules fires the due schedules of this runtime's agents and
// reports how many runs it started.
func (r *Runtime) fireSchedules(ctx context.Context) (int, error) {
	sch, ok := r.store.(store.Scheduler)
	if !ok {
		return 0, nil
	}
	now := r.cfg.now()
	// Only the schedules of this runtime's agents: a worker that runs
	// another agent fires the others.
	agents := slices.Sorted(maps.Keys(r.agents))
	due, err := sch.DueSchedules(ctx, now, agents, 100)
	if err != nil {
		return 0, fmt.Errorf("fire schedules: %w", err)
	}
	started := 0
	var errs []error
	for _, s := range due {
		ok, err := r.fireSchedule(ctx, sch, s, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("fire schedule %s/%s: %w", s.Tenant, s.Name, err))
		}
		if ok {
			started++
		}
	}
	return started, errors.Join(errs...)
}

// fireSchedule handles a due schedule's firing: it starts its run, or
// skips it, or holds it back (overlap queue), as the policies say.
func (r *Runtime) fireSchedule(ctx context.Context, sch store.Scheduler, s store.Schedule, now time.Time) (bool, error) {
	spec, err := cronspec.Parse(s.Spec)
	if err != nil {
		return false, err
	}
	// Firings that passed since NextAt fold into the latest of them: one
	// run at most per handling.
	firing := s.NextAt
	for t := spec.Next(firing); !t.IsZero() && !t.After(now); t = spec.Next(t) {
		firing = t
	}
	next := spec.Next(now)
	skip := store.AdvanceScheduleParams{Tenant: s.Tenant, Name: s.Name, From: s.NextAt, Next: next}

	// Lateness counts from the firing, or from the end of the run a
	// queued firing waited for: waiting for it is not downtime.
	since := firing
	if s.LastRunID != "" {
		prev, err := r.store.GetRun(ctx, s.Tenant, s.LastRunID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Pruned: it ended long ago.
		case err != nil:
			return false, err
		case !prev.Status.Terminal() && s.Overlap == store.OverlapSkip:
			return false, r.skipFiring(ctx, sch, s, skip, firing, store.ScheduleSkippedOverlap)
		case !prev.Status.Terminal() && s.Overlap == store.OverlapQueue:
			return false, nil // the firing stays due until the run ends
		case prev.Status.Terminal() && s.Overlap == store.OverlapQueue && prev.UpdatedAt.After(since):
			since = prev.UpdatedAt
		}
	}
	if now.Sub(since) > ScheduleGrace && s.Missed == store.MissedSkip {
		return false, r.skipFiring(ctx, sch, s, skip, firing, store.ScheduleSkippedMissed)
	}
	fired := event(0, now, store.EventScheduleFired, store.ScheduleFiredData{Schedule: s.Name, Spec: s.Spec,
		FiringAt: firing.UTC(), LateS: now.Sub(firing).Seconds()})
	run, created, err := r.startRun(ctx, RunRequest{Agent: s.Agent, Tenant: s.Tenant, User: "schedule:" + s.Name,
		ClientRequestID: ScheduleRequestID(s.Name, firing), Input: s.Input, RequestedBy: "schedule:" + s.Name}, fired)
	if err != nil {
		return false, err
	}
	advance := skip
	advance.RunID, advance.FiredAt = run.ID, firing
	if _, err := sch.AdvanceSchedule(ctx, advance); err != nil {
		return false, err
	}
	return created, nil
}

// skipFiring moves a schedule past a firing that starts no run, and tells
// the observer why, once: only the worker whose compare-and-set moved the
// schedule on reports it.
func (r *Runtime) skipFiring(ctx context.Context, sch store.Scheduler, s store.Schedule, skip store.AdvanceScheduleParams,
	firing time.Time, reason string) error {
	moved, err := sch.AdvanceSchedule(ctx, skip)
	if err != nil || !moved {
		return err
	}
	r.Operator().observe(store.Run{Tenant: s.Tenant, Agent: s.Agent}, []store.Event{event(0, r.cfg.now(), store.EventScheduleSkipped,
		store.ScheduleSkippedData{Schedule: s.Name, FiringAt: firing.UTC(), Reason: reason})})
	return nil
}
