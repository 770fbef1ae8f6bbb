package support

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// deployFixture starts six tickets on version 1 of the support agent: the
// first three are worked until they finish or wait for a person's approval
// of their refund, the other three are only queued. It returns the store,
// the world, version 1 and the runs.
func deployFixture(t *testing.T) (store.Store, *World, *belay.Agent, []store.Run) {
	t.Helper()
	ctx := t.Context()
	w := newWorld(t)
	if err := w.SeedTickets(ctx, 6); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	v1 := NewAgent(w, scripted.Func(Script()))
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{v1}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	var runs []store.Run
	start := func(i int) {
		ticket := TicketSeed(i)
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: AgentName, Tenant: "acme", User: fmt.Sprint("cust", i),
			ClientRequestID: ticket.ID, Input: ticket.Input()})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	for i := range 3 {
		start(i)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 6; i++ {
		start(i)
	}
	waiting := 0
	for _, r := range runs {
		if got, _ := st.GetRun(ctx, "acme", r.ID); got.Status == store.StatusWaitingApproval {
			waiting++
		}
	}
	if waiting < 2 {
		t.Fatalf("%d runs of version 1 wait for an approval, want at least 2", waiting)
	}
	return st, w, v1, runs
}

// version2 is the support agent with reworded instructions: a new version.
func version2(w *World, continues ...string) *belay.Agent {
	a := NewAgent(w, scripted.Func(Script()))
	a.Instructions += "\nSign every reply with the desk's name."
	a.Continues = continues
	return a
}

// finishAll decides every pending approval as a person would and works the
// runs until none is due.
func finishAll(t *testing.T, rt *belay.Runtime, st store.Store) {
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
			if _, err := rt.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Choice: belay.Approve, By: "human:rita"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("approvals kept coming")
}

// TestDeployContinuesOlderRunsWithoutAPause: version 2 declares that it
// continues version 1, and the runs version 1 left waiting for approval or
// queued all finish on version 2, none paused, each move in its trace.
func TestDeployContinuesOlderRunsWithoutAPause(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, v1, runs := deployFixture(t)
	v2 := version2(w, v1.Version)
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{v2}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Version == v1.Version {
		t.Fatal("version 2 has version 1's version")
	}
	finishAll(t, rt, st)
	moved := 0
	for _, r := range runs {
		got, err := st.GetRun(ctx, "acme", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		events, err := st.Events(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if ev.Type == store.EventStop {
				if d, _ := store.DecodeEvent[store.StopData](ev); d.Reason == "version_mismatch" {
					t.Errorf("run %s paused on a version mismatch", r.ID)
				}
			}
			if ev.Type == store.EventMigrated {
				d, _ := store.DecodeEvent[store.MigratedData](ev)
				if d.By != belay.ContinuesDecider || d.From != v1.Version || d.To != v2.Version {
					t.Errorf("run %s migrated: %+v", r.ID, d)
				}
				moved++
			}
		}
		if got.Status == store.StatusDone && got.AgentVersion == v1.Version {
			continue // finished on version 1 before the deploy
		}
		if got.Status != store.StatusDone || got.AgentVersion != v2.Version {
			t.Errorf("run %s ended %s (%s) on version %s, want done on version 2", r.ID, got.Status, got.StopReason, got.AgentVersion)
		}
	}
	if moved < 5 {
		t.Errorf("%d runs moved to version 2, want the 5 or more version 1 left unfinished", moved)
	}
	counts, err := store.Deployer(st.(*sqlite.Store)).RunsByVersion(ctx)
	if err != nil || len(counts) != 0 {
		t.Errorf("runs not ended by version after the deploy: %+v, %v", counts, err)
	}
}

// TestDeployWithoutContinuesPausesAndMigrateAllMovesThem: version 2 does
// not declare version 1, so its runs pause as before; MigrateAll moves them
// all, a batch at a time, and they finish on version 2.
func TestDeployWithoutContinuesPausesAndMigrateAllMovesThem(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, v1, runs := deployFixture(t)
	v2 := version2(w)
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{v2}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	finishAll(t, rt, st)
	var paused []string
	for _, r := range runs {
		got, _ := st.GetRun(ctx, "acme", r.ID)
		if got.Status == store.StatusPaused && got.StopReason == "version_mismatch" {
			paused = append(paused, r.ID)
		} else if got.Status != store.StatusDone || got.AgentVersion != v1.Version {
			t.Errorf("run %s is %s (%s) on %s; want paused on the mismatch or done on version 1", r.ID, got.Status, got.StopReason, got.AgentVersion)
		}
	}
	if len(paused) < 5 {
		t.Fatalf("%d runs paused on the mismatch, want the 5 or more version 1 left unfinished", len(paused))
	}
	counts, err := store.Deployer(st.(*sqlite.Store)).RunsByVersion(ctx)
	if err != nil || len(counts) != 1 || counts[0].Version != v1.Version || counts[0].Runs != int64(len(paused)) {
		t.Errorf("runs by version before the migration: %+v, %v", counts, err)
	}
	res, err := rt.Operator().MigrateAll(ctx, belay.MigrateAllOptions{Agent: AgentName, From: v1.Version, To: v2.Version, Batch: 2, By: "human:ops"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moved) != len(paused) || res.Batches < 3 {
		t.Errorf("MigrateAll moved %d runs in %d batches, want %d in batches of 2", len(res.Moved), res.Batches, len(paused))
	}
	finishAll(t, rt, st)
	for _, id := range paused {
		got, _ := st.GetRun(ctx, "acme", id)
		if got.Status != store.StatusDone || got.AgentVersion != v2.Version {
			t.Errorf("run %s ended %s (%s) on %s after the migration", id, got.Status, got.StopReason, got.AgentVersion)
		}
		ev, _ := st.Events(ctx, id)
		found := false
		for _, e := range ev {
			if e.Type == store.EventMigrated {
				d, _ := store.DecodeEvent[store.MigratedData](e)
				found = d.By == "human:ops" && d.From == v1.Version && d.To == v2.Version
			}
		}
		if !found {
			t.Errorf("run %s has no migrated event by human:ops", id)
		}
	}
}

// TestMigrateAllIfReplayPasses moves the paused runs whose replay on
// version 2 makes the side effects their recordings made: here all of them,
// since version 2 only rewords the instructions; the replays touch nothing
// in the world.
func TestMigrateAllIfReplayPasses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, v1, _ := deployFixture(t)
	v2 := version2(w)
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{v2}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	finishAll(t, rt, st)
	before := mustCounts(t, w)
	sb := sandbox(t)
	checked := 0
	res, err := rt.Operator().MigrateAll(ctx, belay.MigrateAllOptions{From: v1.Version, To: v2.Version, By: "human:ops",
		Check: func(ctx context.Context, run store.Run) (bool, error) {
			checked++
			r, err := belay.Replay(ctx, st, []store.Run{run}, belay.ReplayOptions{Agent: version2(w), Sandbox: sb})
			if err != nil {
				return false, err
			}
			return belay.ReplayPasses(r[0], run.Status.Terminal()), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 5 || len(res.Moved) != checked || len(res.Refused) != 0 {
		t.Errorf("checked %d runs, moved %d, refused %v; want every paused run moved", checked, len(res.Moved), res.Refused)
	}
	if got := mustCounts(t, w); got != before {
		t.Errorf("the world after the replays: %+v, want %+v", got, before)
	}
}
