package belay

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
	"github.com/belayrun/belay/store/sqlite"
)

// scheduleStore is a new store of a kind: a SQLite file, or a PostgreSQL
// schema of the test's own (skipped without a server, unless CI=true).
func scheduleStore(t *testing.T, kind string) store.Store {
	t.Helper()
	if kind == "sqlite" {
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	dsn := os.Getenv("BELAY_TEST_DATABASE_URL")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	admin, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL (CI=true needs one): %v", err)
		}
		t.Skipf("SKIPPED: no PostgreSQL: %v", err)
	}
	schema := "belay_sched_" + strings.ToLower(rand.Text()[:10])
	st, err := postgres.Open(t.Context(), dsn, postgres.Config{Schema: schema})
	t.Cleanup(func() {
		if st != nil {
			_ = st.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		_ = admin.Close(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// scheduleFixture is a runtime over a store of each kind, on a test clock
// at 12:00 UTC, with an agent whose runs answer at once.
type scheduleFixture struct {
	st    store.Store
	clock *clock
	rt    *Runtime
}

func newScheduleFixture(t *testing.T, kind string) *scheduleFixture {
	t.Helper()
	f := &scheduleFixture{st: scheduleStore(t, kind), clock: newClock()}
	f.rt = f.runtime(t)
	return f
}

// runtime is one more worker over the fixture's store and clock.
func (f *scheduleFixture) runtime(t *testing.T) *Runtime {
	return newRuntime(t, f.st, f.clock, &Agent{Name: "reporter", Model: scripted.New(scripted.Reply{Text: "The report is sent."})})
}

func (f *scheduleFixture) add(t *testing.T, req ScheduleRequest) store.Schedule {
	t.Helper()
	req.Agent, req.Input = "reporter", "Send the hourly report."
	s, err := f.rt.Operator().AddSchedule(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fire has the runtime fire its due schedules, as its sweep does.
func (f *scheduleFixture) fire(t *testing.T) {
	t.Helper()
	if _, err := f.rt.fireSchedules(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// runs are the runs of a schedule, oldest first.
func (f *scheduleFixture) runs(t *testing.T, name string) []store.Run {
	t.Helper()
	runs, err := f.st.ListRuns(t.Context(), store.ListRunsParams{Tenant: DefaultTenant, User: "schedule:" + name})
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func (f *scheduleFixture) schedule(t *testing.T, name string) store.Schedule {
	t.Helper()
	all, err := f.rt.Operator().Schedules(t.Context(), DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no schedule %s", name)
	return store.Schedule{}
}

func at(hour, minute, second int) time.Time {
	return time.Date(2026, 11, 29, hour, minute, second, 0, time.UTC)
}

func eachStore(t *testing.T, fn func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, kind)
		})
	}
}

// A firing seen by several workers at once makes one run, whose request id
// is derived from the schedule and the firing's time.
func TestScheduleFiringRunsOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		f := newScheduleFixture(t, kind)
		if s := f.add(t, ScheduleRequest{Name: "hourly", Cron: "0 * * * *"}); !s.NextAt.Equal(at(13, 0, 0)) {
			t.Fatalf("first firing at %v, want 13:00", s.NextAt)
		}
		f.fire(t)
		if runs := f.runs(t, "hourly"); len(runs) != 0 {
			t.Fatalf("%d runs before the first firing, want none", len(runs))
		}
		f.clock.Advance(time.Hour + 2*time.Second)
		workers := []*Runtime{f.rt, f.runtime(t), f.runtime(t)}
		var wg sync.WaitGroup
		errs := make([]error, len(workers))
		for i, w := range workers {
			wg.Go(func() { _, errs[i] = w.fireSchedules(context.Background()) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		runs := f.runs(t, "hourly")
		if len(runs) != 1 || runs[0].ClientRequestID != ScheduleRequestID("hourly", at(13, 0, 0)) {
			t.Fatalf("runs after three workers fired: %+v; want one, for the 13:00 firing", runs)
		}
		s := f.schedule(t, "hourly")
		if !s.NextAt.Equal(at(14, 0, 0)) || s.LastRunID != runs[0].ID {
			t.Errorf("schedule next at %v, last run %s; want 14:00 and %s", s.NextAt, s.LastRunID, runs[0].ID)
		}
		// The run is a run like any other: a worker executes it.
		if err := f.rt.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r, _ := f.st.GetRun(t.Context(), DefaultTenant, runs[0].ID); r.Status != store.StatusDone {
			t.Errorf("the firing's run is %s, want done", r.Status)
		}
	})
}

// Overlap skip: a firing while the previous run has not ended starts
// nothing, and the schedule goes on.
func TestScheduleOverlapSkip(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		f := newScheduleFixture(t, kind)
		f.add(t, ScheduleRequest{Name: "hourly", Cron: "0 * * * *", Overlap: store.OverlapSkip})
		f.clock.Advance(time.Hour + time.Second)
		f.fire(t) // 13:00: the first run, left queued
		f.clock.Advance(time.Hour)
		f.fire(t) // 14:00: skipped
		if runs := f.runs(t, "hourly"); len(runs) != 1 {
			t.Fatalf("%d runs while the first had not ended, want 1", len(runs))
		}
		if s := f.schedule(t, "hourly"); !s.NextAt.Equal(at(15, 0, 0)) {
			t.Errorf("after a skipped firing the next is %v, want 15:00", s.NextAt)
		}
		if err := f.rt.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour)
		f.fire(t) // 15:00: the first run ended
		runs := f.runs(t, "hourly")
		if len(runs) != 2 || runs[1].ClientRequestID != ScheduleRequestID("hourly", at(15, 0, 0)) {
			t.Errorf("runs after the first ended: %d, the last for %q; want 2, the 15:00 firing", len(runs), runs[len(runs)-1].ClientRequestID)
		}
	})
}

// Overlap queue: the firing waits for the previous run to end, then
// starts; the wait is not downtime, so a missed-firing policy of skip does
// not drop it.
func TestScheduleOverlapQueue(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		f := newScheduleFixture(t, kind)
		f.add(t, ScheduleRequest{Name: "hourly", Cron: "0 * * * *", Overlap: store.OverlapQueue, Missed: store.MissedSkip})
		f.clock.Advance(time.Hour + time.Second)
		f.fire(t) // 13:00
		f.clock.Advance(time.Hour)
		f.fire(t) // 14:00: held back
		if runs := f.runs(t, "hourly"); len(runs) != 1 {
			t.Fatalf("%d runs while the first had not ended, want 1", len(runs))
		}
		if s := f.schedule(t, "hourly"); !s.NextAt.Equal(at(14, 0, 0)) {
			t.Fatalf("a held firing leaves the next at %v, want 14:00", s.NextAt)
		}
		f.clock.Advance(30 * time.Minute)
		if err := f.rt.Drain(t.Context()); err != nil { // the first run ends at 14:30
			t.Fatal(err)
		}
		f.clock.Advance(5 * time.Second)
		f.fire(t)
		runs := f.runs(t, "hourly")
		if len(runs) != 2 || runs[1].ClientRequestID != ScheduleRequestID("hourly", at(14, 0, 0)) {
			t.Fatalf("runs once the first ended: %d; want 2, the second for the 14:00 firing", len(runs))
		}
		if s := f.schedule(t, "hourly"); !s.NextAt.Equal(at(15, 0, 0)) {
			t.Errorf("next at %v, want 15:00", s.NextAt)
		}
	})
}

// Firings missed while no worker ran: skip drops them, run_once starts one
// run, for the latest; both go on from the next firing.
func TestScheduleMissedFirings(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		f := newScheduleFixture(t, kind)
		f.add(t, ScheduleRequest{Name: "skipper", Cron: "0 * * * *", Missed: store.MissedSkip})
		f.add(t, ScheduleRequest{Name: "catcher", Cron: "0 * * * *", Missed: store.MissedRunOnce})
		f.clock.Advance(5*time.Hour + 20*time.Minute) // down from 12:00 to 17:20
		f.fire(t)
		if runs := f.runs(t, "skipper"); len(runs) != 0 {
			t.Errorf("skip: %d runs after downtime, want none", len(runs))
		}
		runs := f.runs(t, "catcher")
		if len(runs) != 1 || runs[0].ClientRequestID != ScheduleRequestID("catcher", at(17, 0, 0)) {
			t.Errorf("run_once: %d runs after downtime; want one, for the latest firing (17:00)", len(runs))
		}
		for _, name := range []string{"skipper", "catcher"} {
			if s := f.schedule(t, name); !s.NextAt.Equal(at(18, 0, 0)) {
				t.Errorf("%s: next at %v, want 18:00", name, s.NextAt)
			}
		}
		// A firing handled within the grace is on time, whatever the
		// policy.
		f.clock.Advance(40*time.Minute + 30*time.Second) // 18:00:30
		f.fire(t)
		if runs := f.runs(t, "skipper"); len(runs) != 1 {
			t.Errorf("skip: %d runs for an on-time firing, want 1", len(runs))
		}
	})
}

// A bad schedule is refused with what to do: a bad cron spec names its
// field and gives an example.
func TestAddScheduleRefusesBadInput(t *testing.T) {
	rt := newRuntime(t, scheduleStore(t, "sqlite"), newClock(), &Agent{Name: "reporter", Model: scripted.New(scripted.Reply{Text: "ok"})})
	for _, c := range []struct {
		req  ScheduleRequest
		want []string
	}{
		{ScheduleRequest{Name: "r", Agent: "reporter", Input: "go", Cron: "0 25 * * *"}, []string{"hour field", `"25"`, "0 9 * * 1-5"}},
		{ScheduleRequest{Name: "r", Agent: "reporter", Input: "go", Cron: "0 9 * *"}, []string{"4 fields, want five", "0 9 * * 1-5"}},
		{ScheduleRequest{Name: "r", Agent: "reporter", Input: "go", Cron: "0 9 * * mon-xyz"}, []string{"day-of-week field"}},
		{ScheduleRequest{Name: "r", Agent: "reporter", Input: "go", Cron: "@hourly", Overlap: "sometimes"}, []string{`overlap "sometimes"`, "skip, queue or allow"}},
		{ScheduleRequest{Name: "r", Agent: "reporter", Input: "go", Cron: "@hourly", Missed: "all"}, []string{`missed "all"`, "skip or run_once"}},
		{ScheduleRequest{Name: "no spaces", Agent: "reporter", Cron: "@hourly"}, []string{`name "no spaces"`, "no input"}},
	} {
		_, err := rt.Operator().AddSchedule(t.Context(), c.req)
		if !errors.Is(err, ErrInvalidSchedule) {
			t.Errorf("%+v: %v, want ErrInvalidSchedule", c.req, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v; want it to say %q", c.req, err, w)
			}
		}
	}
	if got, _ := rt.Operator().Schedules(t.Context(), AnyTenant); len(got) != 0 {
		t.Errorf("refused schedules were kept: %+v", got)
	}
}

// A worker fires only the schedules of the agents it runs; the others stay
// due for a worker that runs theirs.
func TestScheduleOfAnotherAgentWaitsForItsWorker(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		f := newScheduleFixture(t, kind)
		f.add(t, ScheduleRequest{Name: "hourly", Cron: "0 * * * *"})
		if _, err := f.rt.Operator().AddSchedule(t.Context(), ScheduleRequest{Name: "triage", Agent: "triager", Cron: "0 * * * *", Input: "Sort the queue."}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour + time.Second)
		f.fire(t)
		if len(f.runs(t, "hourly")) != 1 || len(f.runs(t, "triage")) != 0 {
			t.Errorf("runs: %d of hourly, %d of triage; want 1 and none", len(f.runs(t, "hourly")), len(f.runs(t, "triage")))
		}
		if s := f.schedule(t, "triage"); !s.NextAt.Equal(at(13, 0, 0)) {
			t.Errorf("triage's next firing moved to %v; want it still due at 13:00", s.NextAt)
		}
	})
}
