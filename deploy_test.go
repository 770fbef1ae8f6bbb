package belay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// A replay passes when it makes every side effect its recording made with
// the same arguments; of an ended recording, exactly those, verified.
func TestReplayPasses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		r     ReplayResult
		ended bool
		want  bool
	}{
		{"the same, verified", ReplayResult{Same: 3, Verified: true}, true, true},
		{"the same, not verified", ReplayResult{Same: 3}, true, false},
		{"one missing", ReplayResult{Same: 2, Missing: 1, Verified: true}, true, false},
		{"other arguments", ReplayResult{Same: 2, DifferentArgs: 1, Verified: true}, false, false},
		{"an extra one after an ended recording", ReplayResult{Same: 3, Extra: 1, Verified: true}, true, false},
		{"the rest of a paused run's work", ReplayResult{Same: 1, Extra: 2}, false, true},
	} {
		if got := ReplayPasses(c.r, c.ended); got != c.want {
			t.Errorf("%s: ReplayPasses = %v, want %v", c.name, got, c.want)
		}
	}
}

// MigrateAll asks its check about each run and leaves the runs it refuses
// paused, naming them.
func TestMigrateAllLeavesWhatItsCheckRefuses(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	old := &Agent{Name: "a", Instructions: "be brief", Model: scripted.New()}
	rtOld := newRuntime(t, st, nil, old)
	var ids []string
	for range 3 {
		run, _, err := rtOld.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	next := &Agent{Name: "a", Instructions: "be thorough", Model: scripted.New()}
	rt := newRuntime(t, st, nil, next)
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Operator().MigrateAll(ctx, MigrateAllOptions{From: old.Version, To: next.Version, By: "human:ops",
		Check: func(_ context.Context, run store.Run) (bool, error) { return run.ID != ids[1], nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moved) != 2 || len(res.Refused) != 1 || res.Refused[0] != ids[1] {
		t.Fatalf("moved %v, refused %v; want all but %s moved", res.Moved, res.Refused, ids[1])
	}
	if got := getRun(t, st, ids[1]); got.Status != store.StatusPaused || got.AgentVersion != old.Version {
		t.Errorf("the refused run is %s on %s, want paused on the old version", got.Status, got.AgentVersion)
	}
	if got := getRun(t, st, ids[0]); got.Status != store.StatusQueued || got.AgentVersion != next.Version {
		t.Errorf("a moved run is %s on %s, want queued on the new version", got.Status, got.AgentVersion)
	}
}

// A run a worker of the old version held when it died is taken, once its
// lease runs out, by a worker of a version that continues the old one, and
// finishes there without a pause, its move in the trace.
func TestContinuesTakesARunItsOldWorkerLeft(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	c := newClock()
	old := &Agent{Name: "a", Instructions: "be brief", Model: scripted.New()}
	run, _, err := newRuntime(t, st, c, old).StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if claimed, err := st.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "gone-worker", Now: c.Now(), TTL: time.Second, Limit: 1}); err != nil || len(claimed) != 1 {
		t.Fatalf("claim as the old worker: %v, %v", claimed, err)
	}
	c.Advance(time.Minute)
	next := &Agent{Name: "a", Instructions: "be thorough", Continues: []string{old.Version},
		Model: scripted.New(scripted.Reply{Text: "done on the new version"})}
	if err := newRuntime(t, st, c, next).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	done := getRun(t, st, run.ID)
	if done.Status != store.StatusDone || done.AgentVersion != next.Version || done.Final != "done on the new version" {
		t.Fatalf("the run is %s (%s) on %s with %q", done.Status, done.StopReason, done.AgentVersion, done.Final)
	}
	ev := findEvent(t, st, run.ID, store.EventMigrated)
	d, err := store.DecodeEvent[store.MigratedData](ev)
	if err != nil || d.By != ContinuesDecider || d.From != old.Version || d.To != next.Version {
		t.Errorf("migrated event %+v, %v", d, err)
	}
}

// deployDesk is an agent whose runs park in each way a deploy meets them:
// "refund" asks for an irreversible refund and waits for its approval,
// "ask" asks its user and waits for the reply, and "plain" answers at once
// (the test leaves it held by a worker that died mid-step).
type deployDesk struct {
	mu      sync.Mutex
	refunds int
}

func (d *deployDesk) agent(instructions string, continues ...string) *Agent {
	refund := NewTool("refund", "refund the order", Irreversible, func(context.Context, struct {
		Order string `json:"order"`
	}) (string, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.refunds++
		return "refunded", nil
	})
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		input := req.Messages[0].Content[0].Text
		answered := len(toolResults(req.Messages))
		switch {
		case input == "refund" && answered == 0:
			return scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: map[string]string{"order": "o-1"}}}}, nil
		case input == "ask" && answered == 0:
			return scripted.Reply{Calls: []scripted.Call{{Name: AskUserTool, Args: map[string]string{"question": "Which order?"}}}}, nil
		}
		return scripted.Reply{Text: "done: " + input}, nil
	})
	return &Agent{Name: "desk", Instructions: instructions, Continues: continues, Model: m, Tools: []Tool{refund},
		Policy: DefaultPolicy, PolicyVersion: "default", Conversation: &Conversation{IdleTimeout: time.Hour}}
}

// runtime serves a with people deciding its approvals.
func (d *deployDesk) runtime(t *testing.T, st store.Store, c *clock, a *Agent) *Runtime {
	t.Helper()
	rt, err := New(Config{Store: st, Agents: []*Agent{a}, HumanApproval: true, now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// Runs of V1 parked on an approval, waiting on their user's input and held
// by a worker that died mid-step all finish on V2 without a pause when V2
// declares it continues V1. Without the declaration they pause with
// version_mismatch, as before, and one MigrateAll moves them all.
func TestDeployMeetsRunsParkedEveryWay(t *testing.T) {
	t.Parallel()
	for _, declared := range []bool{true, false} {
		t.Run(map[bool]string{true: "continued", false: "migrated"}[declared], func(t *testing.T) {
			t.Parallel()
			st, c, desk := openStore(t), newClock(), &deployDesk{}
			ctx := context.Background()
			v1 := desk.agent("be brief")
			rt1 := desk.runtime(t, st, c, v1)
			start := func(input string) string {
				run, _, err := rt1.StartRun(ctx, RunRequest{Agent: "desk", Tenant: "acme", User: "ada", Input: input})
				if err != nil {
					t.Fatal(err)
				}
				return run.ID
			}
			refund, ask := start("refund"), start("ask")
			if err := rt1.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if got := getRun(t, st, refund); got.Status != store.StatusWaitingApproval {
				t.Fatalf("the refund run is %s (%s), want waiting on its approval", got.Status, got.StopReason)
			}
			if got := getRun(t, st, ask); got.Status != store.StatusWaitingInput {
				t.Fatalf("the asking run is %s (%s), want waiting on input", got.Status, got.StopReason)
			}
			plain := start("plain")
			if claimed, err := st.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "gone-worker", Now: c.Now(), TTL: time.Second, Limit: 1}); err != nil || len(claimed) != 1 || claimed[0].ID != plain {
				t.Fatalf("claim as the old worker: %v, %v", claimed, err)
			}
			c.Advance(time.Minute)

			var continues []string
			if declared {
				continues = []string{v1.Version}
			}
			v2 := desk.agent("be thorough", continues...)
			rt2 := desk.runtime(t, st, c, v2)
			if v2.Version == v1.Version {
				t.Fatal("the two versions are one")
			}
			pending, err := st.Approvals(ctx, store.ListApprovalsParams{Tenant: "acme", RunID: refund, Status: store.ApprovalPending})
			if err != nil || len(pending) != 1 {
				t.Fatalf("pending approvals %v, %v", pending, err)
			}
			if _, err := rt2.Decide(ctx, "acme", pending[0].ID, ApprovalDecision{Choice: Approve, By: "human:ops"}); err != nil {
				t.Fatal(err)
			}
			if _, err := rt2.Operator().Say(ctx, "acme", ask, Reply{Text: "o-2"}); err != nil {
				t.Fatal(err)
			}
			if err := rt2.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			ids := []string{refund, ask, plain}
			if !declared {
				for _, id := range ids {
					if got := getRun(t, st, id); got.Status != store.StatusPaused || got.StopReason != "version_mismatch" || got.AgentVersion != v1.Version {
						t.Fatalf("run %s is %s (%s) on %s; without the declaration it pauses on V1", id, got.Status, got.StopReason, got.AgentVersion)
					}
				}
				res, err := rt2.Operator().MigrateAll(ctx, MigrateAllOptions{Tenant: "acme", From: v1.Version, To: v2.Version, By: "human:ops"})
				if err != nil || len(res.Moved) != len(ids) {
					t.Fatalf("migrate all moved %v, %v; want the %d runs", res.Moved, err, len(ids))
				}
				if err := rt2.Drain(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range ids {
				got := getRun(t, st, id)
				if got.Status != store.StatusDone || got.AgentVersion != v2.Version {
					t.Errorf("run %s is %s (%s: %s) on %s, want done on V2", id, got.Status, got.StopReason, got.StopDetail, got.AgentVersion)
				}
				ev := findEvent(t, st, id, store.EventMigrated)
				d, err := store.DecodeEvent[store.MigratedData](ev)
				want := map[bool]string{true: ContinuesDecider, false: "human:ops"}[declared]
				if err != nil || d.By != want || d.From != v1.Version || d.To != v2.Version {
					t.Errorf("run %s: migrated event %+v, %v; want by %s", id, d, err, want)
				}
				paused := countPauses(t, st, id, "version_mismatch")
				if declared && paused != 0 || !declared && paused != 1 {
					t.Errorf("run %s paused %d times on a version mismatch", id, paused)
				}
			}
			desk.mu.Lock()
			defer desk.mu.Unlock()
			if desk.refunds != 1 {
				t.Errorf("%d refunds, want the one approved", desk.refunds)
			}
		})
	}
}

// countPauses counts the times the run paused for reason.
func countPauses(t *testing.T, st store.Store, runID, reason string) int {
	t.Helper()
	events, err := st.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.Type != store.EventStop {
			continue
		}
		if d, err := store.DecodeEvent[store.StopData](e); err == nil && d.Status == store.StatusPaused && d.Reason == reason {
			n++
		}
	}
	return n
}

// A version that continues same tools takes the runs of a version whose
// tools are the same, only its instructions changed, without a pause; a
// tool added or removed, a schema changed, or the option off, and the run
// pauses with version_mismatch as before.
func TestContinuesSameTools(t *testing.T) {
	t.Parallel()
	lookup := NewTool("lookup", "look an order up", Read, func(context.Context, struct {
		Order string `json:"order"`
	}) (string, error) {
		return "shipped", nil
	})
	lookupVerbose := NewTool("lookup", "look an order up, in detail", Read, func(context.Context, struct {
		Order   string `json:"order"`
		Verbose bool   `json:"verbose"`
	}) (string, error) {
		return "shipped on Monday", nil
	})
	note := NewTool("note", "write a note", Write, func(context.Context, struct {
		Text string `json:"text"`
	}) (string, error) {
		return "noted", nil
	})
	// The reworded description of the same tool counts as instructions.
	lookupReworded := lookup
	lookupReworded.Description = "find where an order is"
	for _, c := range []struct {
		name      string
		tools     []Tool
		sameTools bool
		continues bool
	}{
		{"same tools, instructions changed", []Tool{lookupReworded}, true, true},
		{"a tool added", []Tool{lookup, note}, true, false},
		{"a tool removed", nil, true, false},
		{"a schema changed", []Tool{lookupVerbose}, true, false},
		{"same tools, the option off", []Tool{lookup}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			ctx := context.Background()
			old := &Agent{Name: "a", Instructions: "be brief", Tools: []Tool{lookup}, Model: scripted.New()}
			rtOld := newRuntime(t, st, nil, old)
			run, _, err := rtOld.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			// A fork of the run, on its version, is continued or paused as
			// the run is.
			fork, err := rtOld.Fork(ctx, run.ID, ForkOptions{AtStep: 0, By: "human:fran"})
			if err != nil {
				t.Fatal(err)
			}
			next := &Agent{Name: "a", Instructions: "be thorough", Tools: c.tools, ContinuesSameTools: c.sameTools,
				Model: scripted.New(scripted.Reply{Text: "done on the new version"})}
			if err := newRuntime(t, st, nil, next).Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if next.Version == old.Version {
				t.Fatal("the two versions are one")
			}
			for _, id := range []string{run.ID, fork.ID} {
				got := getRun(t, st, id)
				if !c.continues {
					if got.Status != store.StatusPaused || got.StopReason != "version_mismatch" || got.AgentVersion != old.Version {
						t.Errorf("run %s is %s (%s) on %s, want paused on version_mismatch on the old version", id, got.Status, got.StopReason, got.AgentVersion)
					}
					continue
				}
				if got.Status != store.StatusDone || got.AgentVersion != next.Version {
					t.Fatalf("run %s is %s (%s: %s) on %s, want done on the new version", id, got.Status, got.StopReason, got.StopDetail, got.AgentVersion)
				}
				d, err := store.DecodeEvent[store.MigratedData](findEvent(t, st, id, store.EventMigrated))
				if err != nil || d.By != ContinuesDecider || d.Tools == "" {
					t.Errorf("run %s: migrated event %+v, %v; want by %s with the tools' fingerprint", id, d, err, ContinuesDecider)
				}
			}
		})
	}
}
