package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// refusedAs checks that err is a refusal worded as package store words it:
// its message holds want's.
func refusedAs(t *testing.T, what string, err, want error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want.Error()) {
		t.Errorf("%s: %v, want an error saying %q", what, err, want)
	}
}

// testRefusals checks that a store refuses in the words of package store,
// as every driver does.
func testRefusals(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, _, err := s.CreateRun(ctx, store.CreateRunParams{Tenant: uniq("tenant"), Now: t0}); err == nil {
		t.Error("CreateRun without an id: no error")
	} else {
		refusedAs(t, "CreateRun without an id", err, store.CreateRunParams{}.Check())
	}

	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	f := fence(claimed)

	keep := update(claimed)
	keep.Status, keep.KeepLease = store.StatusPaused, true
	p := store.CheckpointParams{Fence: f, Now: t0, Run: keep}
	refusedAs(t, "a KeepLease checkpoint that pauses", s.Checkpoint(ctx, p), p.Check())

	msg := store.Message{RunID: r.ID, Seq: 0, Role: "user", Content: []byte(`"a"`), CreatedAt: t0}
	u := update(claimed)
	u.Messages = 1
	checkpoint(t, s, store.CheckpointParams{Fence: f, Now: t0, Run: u, Messages: []store.Message{msg}})
	err := s.Checkpoint(ctx, store.CheckpointParams{Fence: f, Now: t0, Run: u, Messages: []store.Message{msg}})
	if !errors.Is(err, store.ErrMessageExists) {
		t.Errorf("a checkpoint appending message 0 again: %v, want ErrMessageExists", err)
	}

	_, err = s.StartAttempt(ctx, store.StartAttemptParams{Fence: f, Now: t0, Tenant: r.Tenant, Key: uniq("key"),
		InFlightUntil: t0.Add(time.Minute)})
	if !errors.Is(err, store.ErrNoIntent) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StartAttempt under a key never begun: %v, want ErrNoIntent", err)
	}

	first, _ := beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: t0, Effect: intent(r, uniq("key"), "h1")})
	other := store.BeginEffectParams{Fence: f, Now: t0, Effect: intent(r, first.Key, "h2")}
	_, _, err = s.BeginEffect(ctx, other)
	if !errors.Is(err, store.ErrEffectConflict) {
		t.Errorf("BeginEffect with other arguments: %v, want ErrEffectConflict", err)
	}
	refusedAs(t, "BeginEffect with other arguments", err, other.Check(first))

	resume := store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0, From: []store.Status{store.StatusPaused}}
	_, err = s.ResumeRun(ctx, resume)
	refusedAs(t, "resuming a running run", err, resume.Check(store.StatusRunning))

	paused := update(claimed)
	paused.Messages = 1
	paused.Status, paused.StopReason, paused.LeaseExpires = store.StatusPaused, "budget_usd", time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: f, Now: t0, Run: paused})
	resume.StopReason = "kill_switch"
	_, err = s.ResumeRun(ctx, resume)
	refusedAs(t, "resuming for another stop reason", err, resume.StopReasonMismatch("budget_usd"))

	w, pending := waitingRun(t, s)
	decide := store.DecideParams{Tenant: w.Tenant, ID: pending[0].ID, Binding: pending[0].Binding,
		Status: store.ApprovalApproved, By: "human:ada", Now: t0}
	decided, err := s.DecideApproval(ctx, decide)
	if err != nil {
		t.Fatal(err)
	}
	decide.By = "human:bob"
	_, err = s.DecideApproval(ctx, decide)
	refusedAs(t, "a second decision", err, decide.Check(decided))
}

// testCancelRunWording checks the stop detail a cancel without a note
// records, and the refusal of a cancel of an ended run.
func testCancelRunWording(t *testing.T, s store.AccessStore) {
	r := newRun(t, s, store.CreateRunParams{})
	p := store.CancelRunParams{Tenant: r.Tenant, RunID: r.ID, By: "human:ada", Now: t0}
	got, err := s.CancelRun(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got.StopDetail != p.StopDetail() || got.StopDetail == "" {
		t.Errorf("stop detail of a cancel without a note: %q, want %q", got.StopDetail, p.StopDetail())
	}
	_, err = s.CancelRun(t.Context(), p)
	if !errors.Is(err, store.ErrWrongStatus) {
		t.Errorf("canceling a canceled run: %v, want ErrWrongStatus", err)
	}
	refusedAs(t, "canceling a canceled run", err, p.Check(store.StatusCanceled))
}
