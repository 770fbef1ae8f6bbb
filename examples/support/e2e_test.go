package support

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// runScenario runs ticket T-1001 to its end through the runtime, on a store
// and a world of the test's own, and returns the finished run.
func runScenario(t *testing.T, w *World, s scripted.Script) (store.Run, store.Store) {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{NewAgent(w, scripted.Func(s))}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{
		Agent: AgentName, Tenant: "acme", User: "ada", ClientRequestID: TicketID, Input: demoInput,
	})
	if err != nil {
		t.Fatal(err)
	}
	drainApproving(t, rt, st)
	run, err = st.GetRun(ctx, "acme", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return run, st
}

func TestRunIsDoneAndVerified(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	run, _ := runScenario(t, w, Script())
	if run.Status != store.StatusDone || run.StopReason != "verified" {
		t.Fatalf("run ended %s (%s: %s), want done (verified)", run.Status, run.StopReason, run.StopDetail)
	}
	if run.Final != wantFinal {
		t.Fatalf("final = %q\nwant %q", run.Final, wantFinal)
	}
	if got := mustCounts(t, w); got != (Counts{Refunds: 1, Emails: 1, Notes: 1}) {
		t.Fatalf("counts = %+v, want one of each", got)
	}
}

func TestRunWithoutNoteEscalates(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	run, _ := runScenario(t, w, ScriptWithoutNote())
	if run.Status != store.StatusEscalated || run.StopReason != "unverified" {
		t.Fatalf("run ended %s (%s), want escalated (unverified)", run.Status, run.StopReason)
	}
	if !strings.Contains(run.StopDetail, "reason in CRM") ||
		strings.Contains(run.StopDetail, "order refunded") || strings.Contains(run.StopDetail, "customer emailed") {
		t.Fatalf("stop detail = %s, want only %q missing", run.StopDetail, "reason in CRM")
	}
}

// Billing applies the refund and loses the answer. The runtime must ask
// billing (Reconcile) rather than refund again.
func TestRunReconcilesALostRefund(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.SetLoseRefundResponses(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	run, st := runScenario(t, w, Script())
	if run.Status != store.StatusDone || run.Final != wantFinal {
		t.Fatalf("run ended %s (%s), final %q", run.Status, run.StopReason, run.Final)
	}
	if got := mustCounts(t, w); got.Refunds != 1 {
		t.Fatalf("refunds = %d, want 1", got.Refunds)
	}
	events, err := st.Events(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e store.Event) bool { return e.Type == "reconcile" }) {
		t.Fatal("no reconcile event: the lost response was not resolved by asking billing")
	}
}

// The worker dies after the refund landed and before Belay recorded it (here:
// its context is cancelled at that moment). A second runtime resumes the run
// from the store and finds the refund instead of making another.
func TestRunResumesAfterCrashInTheWindow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	newRuntime := func() *belay.Runtime {
		rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{NewAgent(w, scripted.Func(Script()))}, HumanApproval: true})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}

	first := newRuntime()
	run, _, err := first.StartRun(ctx, belay.RunRequest{
		Agent: AgentName, Tenant: "acme", User: "ada", ClientRequestID: TicketID, Input: demoInput,
	})
	if err != nil {
		t.Fatal(err)
	}
	crashCtx, crash := context.WithCancel(ctx)
	w.AfterEffect = func(kind string) {
		if kind == "refund" {
			crash()
		}
	}
	// Up to the refund's approval, then approve it.
	if err := first.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	pending, err := st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
	if err != nil || len(pending) != 1 || pending[0].Tool != "issue_refund" {
		t.Fatalf("pending approvals %+v (%v), want the refund's", pending, err)
	}
	if _, err := first.Decide(ctx, "acme", pending[0].ID, belay.ApprovalDecision{Verdict: "approve", By: "human:maya"}); err != nil {
		t.Fatal(err)
	}
	_ = first.Drain(crashCtx) // ends with the crash
	w.AfterEffect = nil
	if got := mustCounts(t, w); got.Refunds != 1 || got.Emails != 0 {
		t.Fatalf("after the crash: counts = %+v, want the refund and nothing after it", got)
	}

	drainApproving(t, newRuntime(), st)
	run, err = st.GetRun(ctx, "acme", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.StatusDone || run.Final != wantFinal {
		t.Fatalf("resumed run ended %s (%s: %s), final %q", run.Status, run.StopReason, run.StopDetail, run.Final)
	}
	if got := mustCounts(t, w); got != (Counts{Refunds: 1, Emails: 1, Notes: 1}) {
		t.Fatalf("counts = %+v, want one of each", got)
	}
	// The resumed worker learned of the refund by asking billing (reconcile)
	// or, had the first one recorded it in time, from the ledger. Billing
	// refunds a charge once, so the counts alone would not show a blind
	// second call; the trace does.
	events, err := st.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e store.Event) bool { return e.Type == "reconcile" || e.Type == "effect_reused" }) {
		t.Fatal("the resumed run neither reconciled nor reused the refund")
	}
}

// drainApproving runs due runs, approving every pending approval as a test
// approver, until nothing is due and nothing waits.
func drainApproving(t *testing.T, rt *belay.Runtime, st store.Store) {
	t.Helper()
	ctx := t.Context()
	for range 10 {
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		pending, err := st.Approvals(ctx, store.ListApprovalsParams{Status: store.ApprovalPending})
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			return
		}
		for _, a := range pending {
			if _, err := rt.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Verdict: "approve", By: "policy:test-auto"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("approvals kept coming")
}
