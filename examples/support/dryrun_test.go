package support

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// A dry run reads for real and executes nothing: billing, the mailbox and
// the CRM are as they were, and the run's output is its plan of actions.
func TestDryRunChangesNothingAndPlansEverything(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{NewAgent(w, scripted.Func(Script()))}})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: AgentName, Tenant: "acme", User: "ada",
		ClientRequestID: TicketID, Input: demoInput, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	run, _ = st.GetRun(ctx, "acme", run.ID)
	if run.Status != store.StatusDone || run.StopReason != "dry_run" {
		t.Fatalf("dry run ended %s (%s: %s)", run.Status, run.StopReason, run.StopDetail)
	}
	if got := mustCounts(t, w); got != (Counts{}) {
		t.Errorf("a dry run changed the world: %+v", got)
	}
	for _, want := range []string{"1. issue_refund", "2. add_internal_note", "3. reply"} {
		if !strings.Contains(run.Final, want) {
			t.Errorf("plan does not list %q:\n%s", want, run.Final)
		}
	}
	effects, _ := st.Effects(ctx, "acme", run.ID)
	if len(effects) != 0 {
		t.Errorf("a dry run wrote %d ledger rows", len(effects))
	}
	approvals, _ := st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID})
	if len(approvals) != 0 {
		t.Errorf("a dry run asked for %d approvals", len(approvals))
	}
}
