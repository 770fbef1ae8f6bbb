package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

func testBudgetAndEscalation(t *testing.T, s store.Store) {
	budget := json.RawMessage(`{"max_usd": 0.02,  "max_turns":8}`)
	r := newRun(t, s, store.CreateRunParams{Budget: budget})
	if string(r.Budget) != string(budget) {
		t.Fatalf("created with budget %s, want %s", r.Budget, budget)
	}
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Status = store.StatusEscalated
	u.Escalation = json.RawMessage("{\"reason\": \"max_turns\",\n \"tried\": [\"search_kb\"]}")
	u.LeaseExpires = time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0.Add(time.Second), Run: u})
	got := getRun(t, s, r.ID)
	if string(got.Escalation) != string(u.Escalation) || string(got.Budget) != string(budget) {
		t.Errorf("escalation %s, budget %s after the checkpoint", got.Escalation, got.Budget)
	}
}

func testOutboxWithCheckpoint(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	payload := json.RawMessage(`{"run_id": "x",  "reason":"unverified"}`)
	now := t0.Add(time.Minute)
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: now, Run: update(claimed),
		Outbox: []store.OutboxMessage{{Kind: "escalation", Payload: payload}, {Kind: "run_finished", Payload: json.RawMessage(`{}`)}}})

	// A stale worker's notification is fenced off with the rest of its write.
	stale := fence(claimed)
	stale.Epoch--
	err := s.Checkpoint(t.Context(), store.CheckpointParams{Fence: stale, Now: now, Run: update(claimed),
		Outbox: []store.OutboxMessage{{Kind: "escalation", Payload: payload}}})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale checkpoint: %v, want ErrLeaseLost", err)
	}
	out, err := s.Outbox(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("outbox has %d messages, want 2", len(out))
	}
	m := out[0]
	if m.Kind != "escalation" || string(m.Payload) != string(payload) || m.Tenant != r.Tenant || m.RunID != r.ID ||
		!m.CreatedAt.Equal(now) || !m.DeliveredAt.IsZero() || m.Attempts != 0 || out[1].ID <= m.ID {
		t.Errorf("outbox message %+v", m)
	}
}

func testResumeRun(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{Budget: json.RawMessage(`{"max_usd":0.02}`)})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Status, u.StopReason, u.StopDetail = store.StatusPaused, "budget_usd", "used 0.019"
	u.Escalation = json.RawMessage(`{"reason":"budget_usd"}`)
	u.LeaseExpires = time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u})

	from := []store.Status{store.StatusPaused}
	if _, err := s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: uniq("tenant"), RunID: r.ID, Now: t0, From: from}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resume from another tenant: %v, want ErrNotFound", err)
	}
	if _, err := s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0, From: []store.Status{store.StatusEscalated}}); !errors.Is(err, store.ErrWrongStatus) {
		t.Errorf("resume from the wrong status: %v, want ErrWrongStatus", err)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusPaused {
		t.Fatalf("a refused resume changed the run to %s", got.Status)
	}
	raised := json.RawMessage(`{"max_usd":0.07}`)
	now := t0.Add(time.Hour)
	got, err := s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: now, From: from, Budget: raised,
		Events: []store.Event{{Step: 0, Type: "resumed", Time: now, Data: json.RawMessage(`{"by":"human:ops"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusQueued || got.StopReason != "" || got.StopDetail != "" || got.Escalation != nil ||
		string(got.Budget) != string(raised) || !got.UpdatedAt.Equal(now) {
		t.Errorf("resumed run: status %s, stop %q %q, escalation %s, budget %s", got.Status, got.StopReason, got.StopDetail, got.Escalation, got.Budget)
	}
	if evs := events(t, s, r.ID); len(evs) == 0 || evs[len(evs)-1].Type != "resumed" {
		t.Errorf("events %+v", evs)
	}
	if claimed := claimAll(t, s, "w2", now, time.Hour); len(claimed) != 1 || claimed[0].ID != r.ID {
		t.Errorf("the resumed run is not claimable: %v", ids(claimed))
	}
}

func testKillSwitch(t *testing.T, s store.Store) {
	tenant := uniq("tenant")
	paused := newRun(t, s, store.CreateRunParams{Tenant: tenant})
	claimed := claimRun(t, s, paused.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Status, u.StopReason, u.LeaseExpires = store.StatusPaused, "kill_switch", time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u})
	queued := newRun(t, s, store.CreateRunParams{Tenant: tenant})
	ctx := t.Context()

	if on, _, err := s.KillSwitch(ctx, tenant); err != nil || on {
		t.Fatalf("switch before engaging: %v, %v", on, err)
	}
	if err := s.SetKillSwitch(ctx, store.KillSwitchParams{Tenant: tenant, Engaged: true, Reason: "provider outage", Now: t0}); err != nil {
		t.Fatal(err)
	}
	on, reason, err := s.KillSwitch(ctx, tenant)
	if err != nil || !on || reason != "provider outage" {
		t.Fatalf("engaged switch: %v %q %v", on, reason, err)
	}
	if on, _, _ := s.KillSwitch(ctx, uniq("tenant")); on {
		t.Error("one tenant's switch stops another tenant")
	}
	for _, r := range claimAll(t, s, "w2", t0.Add(time.Second), time.Hour) {
		if r.Tenant == tenant {
			t.Errorf("claimed run %s of a tenant whose switch is engaged", r.ID)
		}
	}

	if err := s.SetKillSwitch(ctx, store.KillSwitchParams{Tenant: tenant, Engaged: false, Now: t0.Add(time.Minute), ResumeReason: "kill_switch"}); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, s, paused.ID); got.Status != store.StatusQueued || got.StopReason != "" {
		t.Errorf("run paused by the switch is %s (%s) after release, want queued", got.Status, got.StopReason)
	}
	var mine []string
	for _, r := range claimAll(t, s, "w2", t0.Add(2*time.Minute), time.Hour) {
		if r.Tenant == tenant {
			mine = append(mine, r.ID)
		}
	}
	if len(mine) != 2 {
		t.Errorf("after release claimed %v, want both %s and %s", mine, queued.ID, paused.ID)
	}
}

// A person answers an unknown outcome as the run resumes: the settlement and
// the requeue are one transaction.
func testResumeSettlesEffects(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	key := uniq("key")
	beginEffect(t, s, store.BeginEffectParams{Fence: fence(claimed), Now: t0, Effect: intent(r, key, "h")})
	u := update(claimed)
	u.Status, u.StopReason, u.LeaseExpires = store.StatusPaused, "unknown_outcome", time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u,
		Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: key, State: store.EffectUnknown}}})

	from := []store.Status{store.StatusPaused}
	_, err := s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0, From: from,
		Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: uniq("never-begun"), State: store.EffectDone}}})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resume settling a key never begun: %v, want ErrNotFound", err)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusPaused {
		t.Fatalf("a failed resume left the run %s", got.Status)
	}
	result := json.RawMessage(`{"refund_id":"RF-7","found_by":"human:ops"}`)
	if _, err := s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0.Add(time.Minute), From: from,
		Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: key, State: store.EffectDone, Result: result}}}); err != nil {
		t.Fatal(err)
	}
	got := effects(t, s, r.Tenant, r.ID)
	if len(got) != 1 || got[0].State != store.EffectDone || string(got[0].Result) != string(result) {
		t.Errorf("effect after the resume: %+v", got)
	}
	if run := getRun(t, s, r.ID); run.Status != store.StatusQueued {
		t.Errorf("run %s after the resume, want queued", run.Status)
	}
}
