package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// Schedules: the store keeps them per tenant, lists the due ones of every
// tenant, and moves one past a firing once, however many workers try.

func scheduler(t *testing.T, s store.Store) store.Scheduler {
	t.Helper()
	sch, ok := s.(store.Scheduler)
	if !ok {
		t.Fatalf("%T keeps no schedules", s)
	}
	return sch
}

func newSchedule(tenant, name string, next time.Time) store.Schedule {
	return store.Schedule{Tenant: tenant, Name: name, Agent: "support", Spec: "0 * * * *", Input: "the hourly check",
		Overlap: store.OverlapSkip, Missed: store.MissedRunOnce, NextAt: next, CreatedBy: "human:maya", CreatedAt: t0}
}

// ofTenant keeps the schedules of one tenant: a driver may share its
// database between cases.
func ofTenant(ss []store.Schedule, tenant string) []store.Schedule {
	var out []store.Schedule
	for _, s := range ss {
		if s.Tenant == tenant {
			out = append(out, s)
		}
	}
	return out
}

func testScheduleRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	sch := scheduler(t, s)
	a, b := uniq("tenant"), uniq("tenant")
	want := newSchedule(a, "hourly", t0.Add(time.Hour))
	for _, sc := range []store.Schedule{want, newSchedule(a, "daily", t0.Add(24*time.Hour)), newSchedule(b, "hourly", t0)} {
		if _, err := sch.PutSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	got, err := sch.Schedules(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "daily" || got[1] != want {
		t.Fatalf("tenant a's schedules = %+v, want daily then %+v", got, want)
	}
	all, err := sch.Schedules(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ofTenant(all, a)) != 2 || len(ofTenant(all, b)) != 1 {
		t.Errorf("every tenant's schedules hold %d of a and %d of b, want 2 and 1", len(ofTenant(all, a)), len(ofTenant(all, b)))
	}

	// Put again replaces, and keeps the record of the last run.
	if ok, err := sch.AdvanceSchedule(ctx, store.AdvanceScheduleParams{Tenant: a, Name: "hourly", From: want.NextAt,
		Next: want.NextAt.Add(time.Hour), RunID: "run-1", FiredAt: want.NextAt}); err != nil || !ok {
		t.Fatalf("advance = %v, %v; want true", ok, err)
	}
	// With the same spec the schedule keeps its next firing (here t0+2h,
	// not the t0+5h the put asks), with another it takes the put's.
	same := want
	same.Input, same.Overlap, same.NextAt = "the hourly check, again", store.OverlapQueue, t0.Add(5*time.Hour)
	stored, err := sch.PutSchedule(ctx, same)
	same.NextAt, same.LastRunID, same.LastFiredAt = want.NextAt.Add(time.Hour), "run-1", want.NextAt
	if err != nil || stored != same {
		t.Errorf("put again with the same spec: %+v, %v; want %+v", stored, err, same)
	}
	replaced := same
	replaced.Spec, replaced.NextAt = "30 * * * *", t0.Add(90*time.Minute)
	stored, err = sch.PutSchedule(ctx, replaced)
	if err != nil || stored != replaced {
		t.Errorf("put with another spec: %+v, %v; want %+v", stored, err, replaced)
	}
	got, _ = sch.Schedules(ctx, a)
	if len(got) != 2 || got[1] != replaced {
		t.Errorf("after replacing, %+v; want %+v", got, replaced)
	}

	// Another tenant's schedule is not found; the tenant's own goes.
	if err := sch.DeleteSchedule(ctx, b, "daily"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete of another tenant's schedule = %v, want ErrNotFound", err)
	}
	if err := sch.DeleteSchedule(ctx, a, "daily"); err != nil {
		t.Fatal(err)
	}
	if got, _ := sch.Schedules(ctx, a); len(got) != 1 || got[0].Name != "hourly" {
		t.Errorf("after delete, %+v; want hourly alone", got)
	}
}

func testSchedulesDue(t *testing.T, s store.Store) {
	ctx := t.Context()
	sch := scheduler(t, s)
	tenant := uniq("tenant")
	for i, at := range []time.Time{t0.Add(-time.Minute), t0.Add(-time.Hour), t0, t0.Add(time.Second)} {
		if _, err := sch.PutSchedule(ctx, newSchedule(tenant, string(rune('a'+i)), at)); err != nil {
			t.Fatal(err)
		}
	}
	other := newSchedule(tenant, "e", t0.Add(-2*time.Hour))
	other.Agent = "billing"
	if _, err := sch.PutSchedule(ctx, other); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		agents []string
		want   string
	}{
		{nil, "ebac"},
		{[]string{"support"}, "bac"},
		{[]string{"billing", "support"}, "ebac"},
		{[]string{"triage"}, ""},
	} {
		due, err := sch.DueSchedules(ctx, t0, c.agents, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var names string
		for _, d := range ofTenant(due, tenant) {
			names += d.Name
		}
		if names != c.want {
			t.Errorf("due at t0 for agents %v: %q, want %q (the longest due first; d is not due)", c.agents, names, c.want)
		}
	}
}

// Two workers handle the same firing: the run its derived request id
// names is created once, and the schedule moves on once.
func testScheduleFiringOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	sch := scheduler(t, s)
	tenant := uniq("tenant")
	sc := newSchedule(tenant, "hourly", t0)
	if _, err := sch.PutSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		run      store.Run
		created  bool
		advanced bool
		err      error
	}
	outs := make([]outcome, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			o := &outs[i]
			o.run, o.created, o.err = s.CreateRun(ctx, store.CreateRunParams{ID: uniq("run"), Tenant: tenant, User: "schedule:hourly",
				ClientRequestID: "schedule:hourly:" + t0.Format(time.RFC3339), Agent: "support", Input: sc.Input, Now: t0})
			if o.err != nil {
				return
			}
			o.advanced, o.err = sch.AdvanceSchedule(ctx, store.AdvanceScheduleParams{Tenant: tenant, Name: "hourly",
				From: sc.NextAt, Next: t0.Add(time.Hour), RunID: o.run.ID, FiredAt: t0})
		})
	}
	wg.Wait()
	for _, o := range outs {
		if o.err != nil {
			t.Fatal(o.err)
		}
	}
	if outs[0].run.ID != outs[1].run.ID || outs[0].created == outs[1].created || outs[0].advanced == outs[1].advanced {
		t.Fatalf("two workers: runs %s and %s, created %v and %v, advanced %v and %v; want one run, created once, advanced once",
			outs[0].run.ID, outs[1].run.ID, outs[0].created, outs[1].created, outs[0].advanced, outs[1].advanced)
	}
	got, _ := sch.Schedules(ctx, tenant)
	if len(got) != 1 || !got[0].NextAt.Equal(t0.Add(time.Hour)) || got[0].LastRunID != outs[0].run.ID || !got[0].LastFiredAt.Equal(t0) {
		t.Errorf("schedule after the firing: %+v; want next at t0+1h, last run %s fired at t0", got, outs[0].run.ID)
	}
	// A worker that read the schedule before it moved changes nothing.
	ok, err := sch.AdvanceSchedule(ctx, store.AdvanceScheduleParams{Tenant: tenant, Name: "hourly", From: t0, Next: t0.Add(2 * time.Hour)})
	if err != nil || ok {
		t.Errorf("a stale advance = %v, %v; want false", ok, err)
	}
	// A skipped firing moves the schedule and keeps the last run.
	ok, err = sch.AdvanceSchedule(ctx, store.AdvanceScheduleParams{Tenant: tenant, Name: "hourly", From: t0.Add(time.Hour), Next: t0.Add(2 * time.Hour)})
	if got, _ := sch.Schedules(ctx, tenant); err != nil || !ok || got[0].LastRunID != outs[0].run.ID || !got[0].NextAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("a skip = %v, %v, schedule %+v; want it moved to t0+2h, last run kept", ok, err, got)
	}
}
