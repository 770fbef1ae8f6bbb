package support

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// Each seeded ticket is worked on its own: a run refunds its customer's
// duplicate charge, notes its ticket and emails its customer, and is
// verified against that ticket, not T-1001.
func TestSeededTicketsAreWorkedOneByOne(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	if err := w.SeedTickets(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := w.SeedTickets(ctx, 3); err != nil {
		t.Fatalf("second seed: %v", err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{NewAgent(w, scripted.Func(Script()))}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	// Ticket 0's refund is small and goes through; ticket 1's needs a
	// person. Ticket 2 gets no run.
	small, large, untouched := TicketSeed(0), TicketSeed(1), TicketSeed(2)
	if small.AmountCents > 5000 || large.AmountCents <= 5000 {
		t.Fatalf("amounts %d and %d: want one at most 50 USD and one above", small.AmountCents, large.AmountCents)
	}
	runs := map[string]string{}
	for _, tk := range []SeededTicket{small, large} {
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: AgentName, Tenant: "acme", User: "desk",
			ClientRequestID: tk.ID, Input: tk.Input()})
		if err != nil {
			t.Fatal(err)
		}
		runs[tk.ID] = run.ID
	}
	drainApproving(t, rt, st)

	approvals, err := st.Approvals(ctx, store.ListApprovalsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(approvals) != 1 || approvals[0].RunID != runs[large.ID] {
		t.Errorf("approvals %+v, want one, for %s's refund", approvals, large.ID)
	}
	for _, tk := range []SeededTicket{small, large} {
		run, err := st.GetRun(ctx, "acme", runs[tk.ID])
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != store.StatusDone || run.StopReason != "verified" {
			t.Errorf("run on %s ended %s (%s: %s), want done (verified)", tk.ID, run.Status, run.StopReason, run.StopDetail)
		}
		s, err := w.TicketState(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Refunds) != 1 || s.Refunds[0].ChargeID != tk.DuplicateChargeID || s.Refunds[0].AmountCents != tk.AmountCents {
			t.Errorf("%s: refunds %+v, want one of %s for %d cents", tk.ID, s.Refunds, tk.DuplicateChargeID, tk.AmountCents)
		}
		if len(s.Emails) != 1 || s.Emails[0].To != tk.Email || len(s.Notes) != 1 {
			t.Errorf("%s: %d emails (%+v) and %d notes, want one of each to %s", tk.ID, len(s.Emails), s.Emails, len(s.Notes), tk.Email)
		}
	}
	s, err := w.TicketState(ctx, untouched.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Refunds)+len(s.Emails)+len(s.Notes) != 0 || len(s.Duplicates) != 1 || len(s.Originals) != 1 {
		t.Errorf("%s, which no run worked on: %+v", untouched.ID, s)
	}
	if got := mustCounts(t, w); got != (Counts{Refunds: 2, Emails: 2, Notes: 2}) {
		t.Errorf("counts = %+v, want two of each", got)
	}
	// TicketStates reads the same, for every ticket at once.
	all, err := w.TicketStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 { // T-1001 and the three seeded
		t.Errorf("TicketStates has %d tickets, want 4", len(all))
	}
	for _, id := range []string{TicketID, small.ID, large.ID, untouched.ID} {
		one, err := w.TicketState(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if all[id] == nil || !reflect.DeepEqual(*all[id], one) {
			t.Errorf("%s: TicketStates says %+v, TicketState %+v", id, all[id], one)
		}
	}
}

// A run is verified against its own ticket: one whose model worked on
// another ticket's customer is not done.
func TestRequirementsCheckTheRunsOwnTicket(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	if err := w.SeedTickets(ctx, 2); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{NewAgent(w, scripted.Func(Script()))}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	// The request is for ticket 1, the message about ticket 0.
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: AgentName, Tenant: "acme", User: "desk",
		ClientRequestID: TicketSeed(1).ID, Input: TicketSeed(0).Input()})
	if err != nil {
		t.Fatal(err)
	}
	drainApproving(t, rt, st)
	run, err = st.GetRun(ctx, "acme", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.StatusEscalated || run.StopReason != "unverified" {
		t.Fatalf("run ended %s (%s: %s), want escalated (unverified)", run.Status, run.StopReason, run.StopDetail)
	}
}
