package support

import (
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// The audit lists the refund a policy approved and not the one a person
// did, nor the note and the email no one had to approve.
func TestAuditListsRefundsAPolicyApproved(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	if err := w.SeedTickets(ctx, 2); err != nil {
		t.Fatal(err)
	}
	rt, st, auto := forkFixture(t, w) // its refund approved by policy:test-auto
	ticket := TicketSeed(1)
	byHand, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: AgentName, Tenant: "acme", User: "cust1", ClientRequestID: ticket.ID, Input: ticket.Input()})
	if err != nil {
		t.Fatal(err)
	}
	finishAll(t, rt, st) // approved by human:rita
	if got, _ := st.GetRun(ctx, "acme", byHand.ID); got.Status != store.StatusDone {
		t.Fatalf("the run a person approved ended %s (%s)", got.Status, got.StopReason)
	}
	found, err := rt.Operator().PolicyApprovals(ctx, belay.AnyTenant, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].RunID != auto.ID || found[0].Tool != "issue_refund" || found[0].DecidedBy != "policy:test-auto" ||
		found[0].State != store.EffectDone {
		t.Fatalf("audit: %+v, want the refund of run %s alone, approved by policy:test-auto", found, auto.ID)
	}
	if later, err := rt.Operator().PolicyApprovals(ctx, "acme", time.Now().Add(time.Hour)); err != nil || len(later) != 0 {
		t.Errorf("audit of runs created after now: %+v, %v", later, err)
	}
}
