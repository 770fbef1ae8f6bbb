package store

import (
	"errors"
	"testing"
	"time"
)

func TestDecideCheck(t *testing.T) {
	now := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	pending := Approval{Status: ApprovalPending, Binding: "b", ExpiresAt: now.Add(time.Hour)}
	approve := DecideParams{Binding: "b", Status: ApprovalApproved, Now: now}
	if err := approve.Check(pending); err != nil {
		t.Errorf("a decision on a pending approval: %v", err)
	}
	decided := pending
	decided.Status, decided.DecidedBy = ApprovalRejected, "human:ada"
	if err := approve.Check(decided); !errors.Is(err, ErrDecided) || err.Error() != "approval already decided: it was rejected by human:ada" {
		t.Errorf("a decision on a decided approval: %v", err)
	}
	other := approve
	other.Binding = "c"
	if err := other.Check(pending); !errors.Is(err, ErrBindingMismatch) {
		t.Errorf("a decision with another binding: %v", err)
	}
	late := approve
	late.Now = pending.ExpiresAt
	if err := late.Check(pending); !errors.Is(err, ErrDecided) {
		t.Errorf("a decision at the expiry: %v", err)
	}
	expiry := ExpiryDecision(pending, pending.ExpiresAt)
	if err := expiry.Check(pending); err != nil {
		t.Errorf("the expiry at the expiry: %v", err)
	}
}

func TestRunChecks(t *testing.T) {
	if err := (CreateRunParams{}).Check(); err == nil {
		t.Error("a run without an id: no error")
	}
	if err := (CreateRunParams{ID: "r"}).Check(); err != nil {
		t.Errorf("a run with an id: %v", err)
	}

	for _, c := range []struct {
		u  RunUpdate
		ok bool
	}{
		{RunUpdate{Status: StatusRunning, KeepLease: true}, true},
		{RunUpdate{Status: StatusPaused}, true},
		{RunUpdate{Status: StatusPaused, KeepLease: true}, false},
		{RunUpdate{Status: StatusRunning, KeepLease: true, ResumeAfter: time.Unix(1, 0)}, false},
	} {
		if err := (CheckpointParams{Run: c.u}).Check(); (err == nil) != c.ok {
			t.Errorf("checkpoint %+v: %v", c.u, err)
		}
	}

	resume := ResumeRunParams{From: []Status{StatusPaused, StatusEscalated}, StopReason: "budget_usd"}
	if err := resume.Check(StatusEscalated); err != nil {
		t.Errorf("resume from escalated: %v", err)
	}
	if err := resume.Check(StatusRunning); !errors.Is(err, ErrWrongStatus) || err.Error() != "run is not in a status that allows this: it is running" {
		t.Errorf("resume from running: %v", err)
	}
	if err := resume.StopReasonMismatch("kill_switch"); !errors.Is(err, ErrWrongStatus) ||
		err.Error() != `run is not in a status that allows this: it stopped for "kill_switch", not "budget_usd"` {
		t.Errorf("StopReasonMismatch: %v", err)
	}

	cancel := CancelRunParams{By: "human:ada"}
	if got := cancel.StopDetail(); got != "canceled by human:ada" {
		t.Errorf("StopDetail without a note = %q", got)
	}
	cancel.Note = "customer withdrew"
	if got := cancel.StopDetail(); got != "customer withdrew" {
		t.Errorf("StopDetail with a note = %q", got)
	}
	for _, s := range []Status{StatusQueued, StatusRunning, StatusWaitingApproval, StatusPaused} {
		if err := cancel.Check(s); err != nil {
			t.Errorf("cancel a %s run: %v", s, err)
		}
	}
	for _, s := range []Status{StatusDone, StatusFailed, StatusEscalated, StatusCanceled} {
		if err := cancel.Check(s); !errors.Is(err, ErrWrongStatus) {
			t.Errorf("cancel a %s run: %v", s, err)
		}
	}
}

func TestBeginCheck(t *testing.T) {
	p := BeginEffectParams{Effect: Effect{Key: "k", ArgsHash: "h1"}}
	if err := p.Check(Effect{Key: "k", ArgsHash: "h1"}); err != nil {
		t.Errorf("the same arguments: %v", err)
	}
	if err := p.Check(Effect{Key: "k", ArgsHash: "h2"}); !errors.Is(err, ErrEffectConflict) || err.Error() != `key "k": idempotency key reused with different arguments` {
		t.Errorf("other arguments: %v", err)
	}
	if !errors.Is(ErrNoIntent, ErrNotFound) {
		t.Error("ErrNoIntent is not an ErrNotFound")
	}
}
