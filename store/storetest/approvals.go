package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// waitingRun returns a run parked in waiting_approval with two pending
// approvals of one turn.
func waitingRun(t *testing.T, s store.Store) (store.Run, []store.Approval) {
	t.Helper()
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Status, u.LeaseExpires = store.StatusWaitingApproval, time.Time{}
	pending := []store.Approval{
		{ID: uniq("ap"), Step: 4, ToolUseID: "toolu_1", Tool: "issue_refund",
			Args: json.RawMessage(`{"charge_id": "CH-2", "amount_usd": 288.00}`), ArgsHash: "h-refund",
			Reason: "refunds above 50 USD need approval", Category: "refund_large",
			Summary: "Refund 288.00 USD on charge CH-2", PolicyVersion: "support@3", Binding: "b-refund",
			ExpiresAt: t0.Add(4 * time.Hour)},
		{ID: uniq("ap"), Step: 4, ToolUseID: "toolu_2", Tool: "reply",
			Args: json.RawMessage(`{"to":"ada@example.com"}`), ArgsHash: "h-reply",
			Reason: "reaches a customer", Category: "reply", Summary: "Email ada@example.com",
			PolicyVersion: "support@3", Binding: "b-reply", ExpiresAt: t0.Add(4 * time.Hour)},
	}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u, Approvals: pending,
		Outbox: []store.OutboxMessage{{Kind: "approval_requested", Payload: json.RawMessage(`{}`)}}})
	return getRun(t, s, r.ID), pending
}

func approvals(t *testing.T, s store.Store, p store.ListApprovalsParams) []store.Approval {
	t.Helper()
	as, err := s.Approvals(t.Context(), p)
	if err != nil {
		t.Fatalf("Approvals: %v", err)
	}
	return as
}

func testApprovalsPersistAndReplay(t *testing.T, s store.Store) {
	r, pending := waitingRun(t, s)
	got := approvals(t, s, store.ListApprovalsParams{RunID: r.ID})
	if len(got) != 2 {
		t.Fatalf("%d approvals, want 2", len(got))
	}
	a := got[0]
	want := pending[0]
	if a.ID != want.ID || a.Tenant != r.Tenant || a.RunID != r.ID || a.Step != 4 || a.ToolUseID != "toolu_1" ||
		string(a.Args) != string(want.Args) || a.ArgsHash != "h-refund" || a.Reason != want.Reason || a.Category != "refund_large" ||
		a.Summary != want.Summary || a.PolicyVersion != "support@3" || a.Binding != "b-refund" || a.Status != store.ApprovalPending ||
		!a.ExpiresAt.Equal(want.ExpiresAt) || !a.CreatedAt.Equal(t0) || a.DecidedBy != "" || !a.DecidedAt.IsZero() {
		t.Errorf("approval read back as %+v", a)
	}

	// The step is replayed by another worker: the same call asks again
	// under a new id and tool_use id; the first approval stands.
	if runs := claimAll(t, s, "w2", t0, time.Hour); len(runs) != 0 {
		t.Fatalf("claimed a run waiting for approval: %v", ids(runs))
	}
	resumed, err := s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0, From: []store.Status{store.StatusWaitingApproval}})
	if err != nil {
		t.Fatal(err)
	}
	c := claimRun(t, s, resumed.ID, "w2", t0.Add(time.Minute), time.Hour)
	again := pending[0]
	again.ID, again.ToolUseID = uniq("ap"), "toolu_9"
	u := update(c)
	u.Status, u.LeaseExpires = store.StatusWaitingApproval, time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: t0.Add(time.Minute), Run: u, Approvals: []store.Approval{again}})
	got = approvals(t, s, store.ListApprovalsParams{RunID: r.ID})
	if len(got) != 2 || got[0].ID != pending[0].ID || got[0].ToolUseID != "toolu_1" {
		t.Errorf("after the replay: %d approvals, first %s/%s; want the original kept", len(got), got[0].ID, got[0].ToolUseID)
	}

	if _, err := s.GetApproval(t.Context(), uniq("tenant"), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetApproval from another tenant: %v, want ErrNotFound", err)
	}
	if n := len(approvals(t, s, store.ListApprovalsParams{Tenant: uniq("tenant")})); n != 0 {
		t.Errorf("another tenant lists %d approvals", n)
	}
	if n := len(approvals(t, s, store.ListApprovalsParams{Tenant: r.Tenant, Status: store.ApprovalPending})); n != 2 {
		t.Errorf("%d pending approvals, want 2", n)
	}
}

func testDecideApproval(t *testing.T, s store.Store) {
	r, pending := waitingRun(t, s)
	ctx := t.Context()
	now := t0.Add(time.Hour)
	decision := func(a store.Approval, status store.ApprovalStatus) store.DecideParams {
		return store.DecideParams{Tenant: r.Tenant, ID: a.ID, Binding: a.Binding, Status: status, By: "human:maya", Note: "ok", Now: now}
	}

	if _, err := s.DecideApproval(ctx, store.DecideParams{Tenant: r.Tenant, ID: pending[0].ID, Binding: "forged", Status: store.ApprovalApproved, By: "human:x", Now: now}); !errors.Is(err, store.ErrBindingMismatch) {
		t.Errorf("decision with another binding: %v, want ErrBindingMismatch", err)
	}
	if _, err := s.DecideApproval(ctx, store.DecideParams{Tenant: uniq("tenant"), ID: pending[0].ID, Binding: "b-refund", Status: store.ApprovalApproved, Now: now}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("decision from another tenant: %v, want ErrNotFound", err)
	}

	edited := decision(pending[0], store.ApprovalEdited)
	edited.EditedArgs, edited.EditedHash = json.RawMessage(`{"charge_id":"CH-2","amount_usd":100}`), "h-edited"
	a, err := s.DecideApproval(ctx, edited)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.ApprovalEdited || string(a.EditedArgs) != string(edited.EditedArgs) || a.EditedHash != "h-edited" ||
		string(a.Args) != string(pending[0].Args) || a.DecidedBy != "human:maya" || !a.DecidedAt.Equal(now) || a.Note != "ok" {
		t.Errorf("edited approval %+v", a)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusWaitingApproval {
		t.Errorf("run is %s with one approval still pending", got.Status)
	}
	if _, err := s.DecideApproval(ctx, decision(pending[0], store.ApprovalRejected)); !errors.Is(err, store.ErrDecided) {
		t.Errorf("a second decision: %v, want ErrDecided", err)
	}

	// Two deciders at once: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.DecideApproval(ctx, decision(pending[1], store.ApprovalApproved)) })
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
		} else if !errors.Is(err, store.ErrDecided) {
			t.Errorf("losing decision: %v, want ErrDecided", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d concurrent decisions won, want 1", wins)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusQueued {
		t.Errorf("run is %s after its last decision, want queued", got.Status)
	}
}

func testApprovalExpiry(t *testing.T, s store.Store) {
	r, pending := waitingRun(t, s)
	ctx := t.Context()
	late := pending[0].ExpiresAt.Add(time.Second)
	_, err := s.DecideApproval(ctx, store.DecideParams{Tenant: r.Tenant, ID: pending[0].ID, Binding: pending[0].Binding,
		Status: store.ApprovalApproved, By: "human:maya", Now: late})
	if !errors.Is(err, store.ErrDecided) {
		t.Errorf("a decision after expiry: %v, want ErrDecided", err)
	}
	if n, err := s.ExpireApprovals(ctx, pending[0].ExpiresAt.Add(-time.Second)); err != nil || n != 0 {
		t.Errorf("ExpireApprovals before the expiry: %d, %v", n, err)
	}
	n, err := s.ExpireApprovals(ctx, late)
	if err != nil || n != 2 {
		t.Fatalf("ExpireApprovals: %d, %v; want 2", n, err)
	}
	for _, a := range approvals(t, s, store.ListApprovalsParams{RunID: r.ID}) {
		if a.Status != store.ApprovalExpired || a.DecidedBy != "policy:expiry" || !a.DecidedAt.Equal(late) {
			t.Errorf("expired approval %+v", a)
		}
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusQueued {
		t.Errorf("run is %s after its approvals expired, want queued", got.Status)
	}
}

// testExpireDueApprovals: the expiry returns what it expired, as decided,
// with the events it appended to each run's trace, once.
func testExpireDueApprovals(t *testing.T, s store.Store) {
	r, pending := waitingRun(t, s)
	ctx := t.Context()
	before := events(t, s, r.ID)
	if got, err := s.ExpireDueApprovals(ctx, store.ExpireApprovalsParams{Now: pending[0].ExpiresAt.Add(-time.Second)}); err != nil || len(got) != 0 {
		t.Errorf("ExpireDueApprovals before the expiry: %d, %v", len(got), err)
	}
	late := pending[0].ExpiresAt.Add(time.Second)
	expired, err := s.ExpireDueApprovals(ctx, store.ExpireApprovalsParams{Now: late})
	if err != nil || len(expired) != 2 {
		t.Fatalf("ExpireDueApprovals: %d, %v; want 2", len(expired), err)
	}
	var written []store.Event
	for i, e := range expired {
		a := e.Approval
		if a.ID != pending[i].ID || a.RunID != r.ID || a.Tenant != r.Tenant || a.Category != pending[i].Category ||
			a.Status != store.ApprovalExpired || a.DecidedBy != store.ExpiryDecider || !a.DecidedAt.Equal(late) {
			t.Errorf("expired approval %d returned as %+v", i, a)
		}
		want := store.ExpiryDecision(pending[i], late).Events
		want[0].RunID = r.ID
		checkEvents(t, "events of expired approval "+a.ID, e.Events, want)
		written = append(written, e.Events...)
	}
	if len(written) > 0 {
		var data store.ApprovalExpiredData
		if err := json.Unmarshal(written[0].Data, &data); err != nil || data.Category != "refund_large" || data.Tool != "issue_refund" ||
			data.By != store.ExpiryDecider || data.ApprovalID != pending[0].ID {
			t.Errorf("approval_expired data %s (%v): want the approval, its category, tool and decider", written[0].Data, err)
		}
	}
	checkEvents(t, "the run's trace", events(t, s, r.ID)[len(before):], written)
	if got := getRun(t, s, r.ID); got.Status != store.StatusQueued {
		t.Errorf("run is %s after its approvals expired, want queued", got.Status)
	}
	if again, err := s.ExpireDueApprovals(ctx, store.ExpireApprovalsParams{Now: late.Add(time.Hour)}); err != nil || len(again) != 0 {
		t.Errorf("ExpireDueApprovals again: %d, %v; want nothing left to expire", len(again), err)
	}
	if n := len(events(t, s, r.ID)); n != len(before)+2 {
		t.Errorf("%d events after expiring again, want %d", n, len(before)+2)
	}
}

func testCounts(t *testing.T, s store.Store) {
	before, err := s.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waitingRun(t, s) // a waiting run with two pending approvals
	newRun(t, s, store.CreateRunParams{})
	after, err := s.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after.Runs[store.StatusWaitingApproval]-before.Runs[store.StatusWaitingApproval] != 1 ||
		after.Runs[store.StatusQueued]-before.Runs[store.StatusQueued] != 1 ||
		after.PendingApprovals-before.PendingApprovals != 2 {
		t.Errorf("counts went from %+v to %+v; want one more waiting run, one more queued, two more pending approvals", before, after)
	}
}
