package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// A run records which arguments of its tools are secret when it is
// created, and every read of the run returns the record as it was written:
// readers without the agent's code redact by it. A run created with none
// records none, which is not the same as knowing nothing (nil, for runs
// older than the record).
func testRunSensitive(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := map[string]store.SensitiveArgs{
		"charge":        {Fields: []string{"card_number", "cvc"}, Declared: []string{"amount", "card_number", "cvc"}},
		"save_password": {Fields: []string{"password"}},
	}
	p := store.CreateRunParams{ID: uniq("run"), Tenant: uniq("tenant"), User: "ada", ClientRequestID: "req-1",
		Agent: "cards", Now: t0, Sensitive: want}
	created, _, err := s.CreateRun(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got map[string]store.SensitiveArgs) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Sensitive = %+v, want %+v", what, got, want)
		}
	}
	check("CreateRun", created.Sensitive)
	check("GetRun", getRun(t, s, p.ID).Sensitive)

	// A retry of the request returns the first run's record, not its own.
	retry := p
	retry.ID, retry.Sensitive = uniq("run"), map[string]store.SensitiveArgs{"charge": {Fields: []string{"amount"}}}
	again, created2, err := s.CreateRun(ctx, retry)
	if err != nil || created2 {
		t.Fatalf("CreateRun retry: created %v, %v", created2, err)
	}
	check("CreateRun retry", again.Sensitive)

	listed, err := s.ListRuns(ctx, store.ListRunsParams{Tenant: p.Tenant})
	if err != nil || len(listed) != 1 {
		t.Fatalf("ListRuns: %d runs, %v", len(listed), err)
	}
	check("ListRuns", listed[0].Sensitive)
	claimed := claimRun(t, s, p.ID, "w1", t0, time.Minute)
	check("ClaimRuns", claimed.Sensitive)

	// Checkpoints never touch it.
	u := update(claimed)
	u.Step, u.Status, u.StopReason, u.LeaseExpires = 1, store.StatusPaused, "max_turns", time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u})
	check("GetRun after a checkpoint", getRun(t, s, p.ID).Sensitive)
	resumed, err := s.ResumeRun(ctx, store.ResumeRunParams{Tenant: p.Tenant, RunID: p.ID, Now: t0,
		From: []store.Status{store.StatusPaused}})
	if err != nil {
		t.Fatal(err)
	}
	check("ResumeRun", resumed.Sensitive)
	claimed = claimRun(t, s, p.ID, "w1", t0, time.Minute)
	taken, err := s.TakeOver(ctx, store.TakeOverParams{RunID: p.ID, Epoch: claimed.LeaseEpoch, Owner: "w2", Now: t0, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	check("TakeOver", taken.Sensitive)
	if as, ok := s.(store.AccessStore); ok {
		canceled, err := as.CancelRun(ctx, store.CancelRunParams{Tenant: p.Tenant, RunID: p.ID, By: "human:ops", Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		check("CancelRun", canceled.Sensitive)
	}

	none := newRun(t, s, store.CreateRunParams{})
	if got := getRun(t, s, none.ID).Sensitive; got == nil || len(got) != 0 {
		t.Errorf("a run created with no secrets: Sensitive = %#v, want an empty record", got)
	}
}
