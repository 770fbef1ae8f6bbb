package belay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// createUnbudgetedRun makes a run as one created before migration 002 is:
// its budget column NULL.
func createUnbudgetedRun(t *testing.T, st store.Store, agent *Agent, now time.Time) store.Run {
	t.Helper()
	run, _, err := st.CreateRun(context.Background(), store.CreateRunParams{ID: "run-before-002", Tenant: "default", User: "u",
		ClientRequestID: "r-1", Agent: agent.Name, AgentVersion: agent.Version, Input: "go", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if run.Budget != nil {
		t.Fatalf("run created with budget %s, want none", run.Budget)
	}
	return run
}

// budgetAgent spends $0.014571 a turn against a $0.04 budget of 2 turns:
// the turns run out after the second call, the dollars after the third.
func budgetAgent(b Budget) (*Agent, *meteredModel) {
	m := &meteredModel{next: 6006}
	for _, id := range []string{"A-1", "A-2", "A-3", "A-4"} {
		m.replies = append(m.replies, callReply(id, 14571))
	}
	m.replies = append(m.replies, textReply("done"))
	b.MaxTurns, b.MaxUSD = 2, 0.04
	return &Agent{Name: "a", Model: m, Tools: []Tool{lookupTool()}, Prices: oneDollarPerMTok, Budget: b}, m
}

// A run without a recorded budget is held to its agent's, the deadline
// counted from the run's start as StartRun would have fixed it.
func TestRunWithoutABudgetKeepsTheAgentsDeadline(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	c := newClock()
	agent, m := budgetAgent(Budget{Deadline: 10 * time.Minute})
	rt := newRuntime(t, st, c, agent)
	run := createUnbudgetedRun(t, st, agent, c.Now())

	c.Advance(11 * time.Minute)
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, run.ID); got.Status != store.StatusPaused || got.StopReason != "deadline" || m.calls != 0 {
		t.Fatalf("run %s (%s: %s) after %d calls, 11 minutes after it started; want paused on the agent's 10-minute deadline before any call",
			got.Status, got.StopReason, got.StopDetail, m.calls)
	}

	// An hour more: the run goes on until the agent's 2 turns are used.
	if _, err := rt.Operator().Resume(ctx, "", run.ID, Raise{Time: time.Hour}, "human:ops"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, run.ID); got.Status != store.StatusPaused || got.StopReason != "max_turns" || m.calls != 2 ||
		!strings.Contains(got.StopDetail, "the limit is 2") {
		t.Fatalf("after an hour more: run %s (%s: %s) after %d calls; want paused on the agent's 2 turns after 2",
			got.Status, got.StopReason, got.StopDetail, m.calls)
	}
}

// Resuming such a run adds to the agent's limits: it does not replace them
// with what the operator added.
func TestResumedRunWithoutABudgetKeepsTheAgentsLimits(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	agent, m := budgetAgent(Budget{})
	rt := newRuntime(t, st, nil, agent)
	run := createUnbudgetedRun(t, st, agent, rt.cfg.now())

	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, run.ID); got.Status != store.StatusPaused || got.StopReason != "max_turns" || m.calls != 2 {
		t.Fatalf("run %s (%s: %s) after %d calls; want paused on the agent's 2 turns", got.Status, got.StopReason, got.StopDetail, m.calls)
	}

	// One turn more: the third call is made, and the agent's $0.04 stops
	// the fourth.
	if _, err := rt.Operator().Resume(ctx, "", run.ID, Raise{Turns: 1}, "human:ops"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got := getRun(t, st, run.ID)
	if got.Status != store.StatusPaused || got.StopReason != "max_turns" || m.calls != 3 || !strings.Contains(got.StopDetail, "the limit is 3") {
		t.Fatalf("after one turn more: run %s (%s: %s) after %d calls; want paused on 2+1 turns after 3",
			got.Status, got.StopReason, got.StopDetail, m.calls)
	}
	if _, err := rt.Operator().Resume(ctx, "", run.ID, Raise{Turns: 5}, "human:ops"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got = getRun(t, st, run.ID)
	if got.Status != store.StatusPaused || got.StopReason != "budget_usd" || m.calls != 3 || !strings.Contains(got.StopDetail, "the limit is $0.040000") {
		t.Fatalf("after five turns more: run %s (%s: %s) after %d calls; want paused on the agent's $0.04 after 3",
			got.Status, got.StopReason, got.StopDetail, m.calls)
	}
	if got.CostNanoUSD != 3*int64(model.USD(0.014571)) {
		t.Errorf("cost %d nano-USD, want 3 turns of $0.014571", got.CostNanoUSD)
	}
}
