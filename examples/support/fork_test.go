package support

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// forkFixture runs ticket T-1001 to its end and returns the runtime, its
// store and the finished run: the parent of the forks.
func forkFixture(t *testing.T, w *World) (*belay.Runtime, store.Store, store.Run) {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{NewAgent(w, scripted.Func(Script()))}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: AgentName, Tenant: "acme", User: "ada", ClientRequestID: TicketID, Input: demoInput})
	if err != nil {
		t.Fatal(err)
	}
	drainApproving(t, rt, st)
	if run, err = st.GetRun(ctx, "acme", run.ID); err != nil || run.Status != store.StatusDone {
		t.Fatalf("the parent run: %s (%s), %v", run.Status, run.StopReason, err)
	}
	return rt, st, run
}

// TestForkAtEveryStepRepeatsNothing forks the support run at each of its
// steps and lets every fork run to its end, a person rejecting whatever it
// asks: the world gains no refund, email or note, each fork's ledger holds
// the parent's effects up to its step and nothing else, every approval a
// fork asks for names the parent's effect it would repeat, and each fork
// starts with the parent's usage at its step.
func TestForkAtEveryStepRepeatsNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	rt, st, parent := forkFixture(t, w)
	before := mustCounts(t, w)
	if before != (Counts{Refunds: 1, Emails: 1, Notes: 1}) {
		t.Fatalf("the parent left %+v, want one of each", before)
	}
	parentEffects, err := st.Effects(ctx, "acme", parent.ID)
	if err != nil || len(parentEffects) != 3 {
		t.Fatalf("the parent's ledger: %d effects, %v", len(parentEffects), err)
	}
	for n := 0; n <= parent.Step; n++ {
		fork, err := rt.Fork(ctx, parent.ID, belay.ForkOptions{AtStep: n, By: "human:fran", Reason: "replay the ticket"})
		if err != nil {
			t.Fatalf("fork at step %d: %v", n, err)
		}
		// One model call a step in the script: the fork has the parent's n.
		if fork.Step != n || fork.ModelCalls != int64(n) || fork.Status != store.StatusQueued {
			t.Errorf("fork at step %d: step %d, %d model calls, %s", n, fork.Step, fork.ModelCalls, fork.Status)
		}
		asked := 0
		for range 10 {
			if err := rt.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			pending, err := st.Approvals(ctx, store.ListApprovalsParams{Tenant: "acme", RunID: fork.ID, Status: store.ApprovalPending})
			if err != nil {
				t.Fatal(err)
			}
			if len(pending) == 0 {
				break
			}
			for _, a := range pending {
				asked++
				if a.ParentEffect == nil || a.ParentEffect.RunID != parent.ID || a.ParentEffect.State != store.EffectDone ||
					!strings.Contains(a.Reason, "parent run "+parent.ID+" did this") {
					t.Errorf("fork at step %d: approval of %s names no parent effect: %+v, reason %q", n, a.Tool, a.ParentEffect, a.Reason)
				}
				if _, err := rt.Decide(ctx, "acme", a.ID, belay.ApprovalDecision{Choice: belay.Reject, By: "human:rita",
					Note: "the parent run did this already"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := mustCounts(t, w); got != before {
			t.Fatalf("after the fork at step %d the world holds %+v, want %+v", n, got, before)
		}
		// The parent's effects after step n are asked about; those up to n
		// are answered by the ledger.
		var carried int
		for _, e := range parentEffects {
			if e.Step < n {
				carried++
			}
		}
		if want := len(parentEffects) - carried; n < parent.Step && asked == 0 {
			t.Errorf("fork at step %d asked nothing; the parent made %d side effects after it", n, want)
		}
		forkEffects, err := st.Effects(ctx, "acme", fork.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(forkEffects) != carried {
			t.Errorf("fork at step %d: %d effects in its ledger, want the parent's %d up to the step", n, len(forkEffects), carried)
		}
		for _, e := range forkEffects {
			if !strings.HasPrefix(e.Key, fork.ID+":") || e.State != store.EffectDone || e.Step >= n {
				t.Errorf("fork at step %d: ledger holds %+v", n, e)
			}
		}
		done, err := st.GetRun(ctx, "acme", fork.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !done.Status.Terminal() {
			t.Errorf("fork at step %d ended %s (%s)", n, done.Status, done.StopReason)
		}
		if n == parent.Step {
			// Nothing more to do: the model answers at once, verified
			// against the parent's ticket, with its guard counting the
			// parent's calls.
			var g struct {
				Calls int `json:"calls"`
			}
			if err := json.Unmarshal(done.Guard, &g); err != nil || g.Calls != parent.Step {
				t.Errorf("fork at the last step: guard %s, want %d calls", done.Guard, parent.Step)
			}
			if done.Status != store.StatusDone || done.StopReason != "verified" || asked != 0 {
				t.Errorf("fork at the last step ended %s (%s) after %d approvals", done.Status, done.StopReason, asked)
			}
		}
	}
	if ls, err := st.(store.Forker).Forks(ctx, "acme", parent.ID); err != nil || len(ls) != parent.Step+1 {
		t.Errorf("lineage: %d forks of the parent, %v", len(ls), err)
	}
}

// TestForkWithAnotherMessageMeetsTheGate forks the support run at its start
// with the customer's message changed to another ticket's: the model asks
// for another refund, which waits for a person and is no repeat of the
// parent's, and is made only once approved.
func TestForkWithAnotherMessageMeetsTheGate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	if err := w.SeedTickets(ctx, 3); err != nil {
		t.Fatal(err)
	}
	rt, st, parent := forkFixture(t, w)
	before := mustCounts(t, w)
	other := TicketSeed(1) // above 50 USD: a person approves it
	fork, err := rt.Fork(ctx, parent.ID, belay.ForkOptions{AtStep: 0, Message: other.Input(), By: "human:fran"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.Input != other.Input() {
		t.Errorf("fork's input %q, want the new message", fork.Input)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	pending, err := st.Approvals(ctx, store.ListApprovalsParams{Tenant: "acme", RunID: fork.ID, Status: store.ApprovalPending})
	if err != nil || len(pending) != 1 {
		t.Fatalf("%d pending approvals of the fork, %v", len(pending), err)
	}
	a := pending[0]
	var args struct {
		ChargeID string `json:"charge_id"`
	}
	if err := json.Unmarshal(a.Args, &args); err != nil || a.Tool != "issue_refund" || args.ChargeID != other.DuplicateChargeID || a.ParentEffect != nil {
		t.Fatalf("approval %s %s (parent effect %+v), want a refund of %s that repeats nothing", a.Tool, a.Args, a.ParentEffect, other.DuplicateChargeID)
	}
	if got := mustCounts(t, w); got != before {
		t.Fatalf("before the decision the world holds %+v, want %+v", got, before)
	}
	if _, err := rt.Decide(ctx, "acme", a.ID, belay.ApprovalDecision{Choice: belay.Approve, By: "human:rita"}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	refunds, err := w.RefundsOf(ctx, other.DuplicateChargeID)
	if err != nil || len(refunds) != 1 {
		t.Fatalf("refunds of %s after the approval: %d, %v", other.DuplicateChargeID, len(refunds), err)
	}
	if got := mustCounts(t, w); got.Refunds != before.Refunds+1 {
		t.Errorf("refunds %d, want %d: the approved one alone", got.Refunds, before.Refunds+1)
	}
}
