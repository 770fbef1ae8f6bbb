package support

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// recordRuns works n seeded tickets to their end, their refunds approved,
// and returns the store and the runs.
func recordRuns(t *testing.T, w *World, n int) (store.Store, []store.Run) {
	t.Helper()
	ctx := t.Context()
	if err := w.SeedTickets(ctx, n); err != nil {
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
	for i := range n {
		ticket := TicketSeed(i)
		if _, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: AgentName, Tenant: "acme", User: ticket.Email,
			ClientRequestID: ticket.ID, Input: ticket.Input()}); err != nil {
			t.Fatal(err)
		}
	}
	drainApproving(t, rt, st)
	runs, err := st.ListRuns(ctx, store.ListRunsParams{Tenant: "acme"})
	if err != nil || len(runs) != n {
		t.Fatalf("%d runs recorded, %v", len(runs), err)
	}
	for _, r := range runs {
		if r.Status != store.StatusDone {
			t.Fatalf("recorded run %s ended %s (%s)", r.ID, r.Status, r.StopReason)
		}
	}
	return st, runs
}

func sandbox(t *testing.T) store.Store {
	t.Helper()
	sb, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sandbox.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

// TestReplayComparesTheAlternativeScript replays 200 recorded runs on the
// script without the internal note: every replay lacks the note and only
// it, asks for the approvals its recording asked for, and the world does
// not change; replayed on the script they were recorded with, every effect
// is the same.
func TestReplayComparesTheAlternativeScript(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t)
	const n = 200
	start := time.Now()
	st, runs := recordRuns(t, w, n)
	t.Logf("recorded %d runs in %v", n, time.Since(start))
	before := mustCounts(t, w)
	var approvals int
	asked, err := st.Approvals(ctx, store.ListApprovalsParams{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	approvals = len(asked)

	start = time.Now()
	results, err := belay.Replay(ctx, st, runs, belay.ReplayOptions{Agent: NewAgent(w, scripted.Func(ScriptWithoutNote())), Sandbox: sandbox(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replayed %d runs in %v", n, time.Since(start))
	if len(results) != n {
		t.Fatalf("%d results for %d runs", len(results), n)
	}
	replayedApprovals := 0
	for _, r := range results {
		replayedApprovals += r.Approvals
		if r.Same != 2 || r.Missing != 1 || r.Extra != 0 || r.DifferentArgs != 0 || r.WouldHaveDone != 0 {
			t.Errorf("replay of %s: same %d, missing %d, extra %d, different %d, would have done %d; want the note missing alone: %+v",
				r.RunID, r.Same, r.Missing, r.Extra, r.DifferentArgs, r.WouldHaveDone, r.Effects)
			continue
		}
		for _, e := range r.Effects {
			if (e.Comparison == belay.EffectMissing) != (e.Tool == "add_internal_note") {
				t.Errorf("replay of %s: %s %s", r.RunID, e.Tool, e.Comparison)
			}
		}
		if r.Turns != 7 || r.InputTokens == 0 || r.Status != store.StatusDone {
			t.Errorf("replay of %s: %d turns, %d input tokens, %s (%s)", r.RunID, r.Turns, r.InputTokens, r.Status, r.StopReason)
		}
	}
	if replayedApprovals != approvals {
		t.Errorf("the replays asked for %d approvals, the recordings %d", replayedApprovals, approvals)
	}
	if got := mustCounts(t, w); got != before {
		t.Errorf("the world after the replays holds %+v, want %+v", got, before)
	}

	same, err := belay.Replay(ctx, st, runs[:20], belay.ReplayOptions{Agent: NewAgent(w, scripted.Func(Script())), Sandbox: sandbox(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range same {
		if r.Same != 3 || r.Missing+r.Extra+r.DifferentArgs != 0 || !r.Verified || r.Turns != 8 {
			t.Errorf("replay of %s on its own script: %+v", r.RunID, r)
		}
	}
}
