package belay_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/metrics"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// A schedule's firing writes schedule_fired on the run it starts and is
// counted once, though two workers see it; firings that start no run are
// counted by reason.
func TestScheduleFiringsTracedAndCounted(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	clock := belay.NewTestClock()
	worker := func() *belay.Runtime {
		// The run asks its user and waits: it has not ended at the next
		// firing.
		agent := &belay.Agent{Name: "reporter", Conversation: &belay.Conversation{}, Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{{Name: belay.AskUserTool, Args: map[string]string{"question": "Which week?"}}}})}
		cfg := belay.Config{Store: st, Agents: []*belay.Agent{agent}, Observer: m}
		belay.SetTestClock(&cfg, clock.Now)
		rt, err := belay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	a, b := worker(), worker()
	for _, req := range []belay.ScheduleRequest{
		{Name: "hourly", Cron: "0 * * * *", Overlap: store.OverlapSkip},
		{Name: "half-past", Cron: "30 * * * *", Missed: store.MissedSkip},
	} {
		req.Agent, req.Input = "reporter", "Send the report."
		if _, err := a.Operator().AddSchedule(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() {
		t.Helper()
		for _, rt := range []*belay.Runtime{a, b} {
			if err := rt.Drain(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 13:00:05: hourly fires on time; half-past's 12:30 passed unseen and
	// is skipped as missed.
	clock.Advance(time.Hour + 5*time.Second)
	drain()
	runs, err := st.ListRuns(ctx, store.ListRunsParams{Tenant: belay.DefaultTenant, User: "schedule:hourly"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("hourly's runs: %d, %v; want 1", len(runs), err)
	}
	events, err := st.Events(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var fired []store.ScheduleFiredData
	for _, ev := range events {
		if ev.Type == store.EventScheduleFired {
			d, err := store.DecodeEvent[store.ScheduleFiredData](ev)
			if err != nil {
				t.Fatal(err)
			}
			fired = append(fired, d)
		}
	}
	firing := time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)
	if len(fired) != 1 || fired[0].Schedule != "hourly" || fired[0].Spec != "0 * * * *" || !fired[0].FiringAt.Equal(firing) || fired[0].LateS != 5 {
		t.Errorf("the run's schedule_fired events: %+v; want one, of hourly's 13:00 firing, 5 s late", fired)
	}
	// 14:00:05: hourly's run still waits, so its firing is skipped; so is
	// half-past's 13:30, missed again.
	clock.Advance(time.Hour)
	drain()

	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if c := mt.GetCounter(); c != nil {
				got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = c.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"belay_schedule_firings_total{agent=reporter}":                        1,
		"belay_schedule_firings_skipped_total{agent=reporter,reason=overlap}": 1,
		"belay_schedule_firings_skipped_total{agent=reporter,reason=missed}":  2,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}
