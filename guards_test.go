package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// meteredModel answers from a list with exact usage, and counts a request's
// input tokens as told: the figures of a budget test are chosen, not derived.
type meteredModel struct {
	replies []model.Response
	next    int64 // CountTokens answer
	calls   int
	bound   time.Duration
}

func (m *meteredModel) Name() string { return "metered" }

func (m *meteredModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if m.calls >= len(m.replies) {
		return model.Response{}, fmt.Errorf("metered model: no reply %d", m.calls+1)
	}
	m.calls++
	return m.replies[m.calls-1], nil
}

func (m *meteredModel) CountTokens(ctx context.Context, req model.Request) (int64, error) {
	return m.next, nil
}

func (m *meteredModel) MaxCallDuration() time.Duration { return m.bound }

func callReply(id string, in int64) model.Response {
	return model.Response{
		Content:    []model.Block{model.ToolUseBlock(id, "lookup", json.RawMessage(`{"id":"`+id+`"}`))},
		StopReason: model.StopToolUse, Usage: model.Usage{InputTokens: in},
	}
}

func textReply(text string) model.Response {
	return model.Response{Content: []model.Block{model.TextBlock(text)}, StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: 100}}
}

// oneDollarPerMTok makes input tokens cost a micro-dollar each and output
// free, so spend reads straight off the token counts.
var oneDollarPerMTok = model.PriceTable{"metered": {InputPerMTok: 1}}

func stopEvent(t *testing.T, st store.Store, runID string) map[string]any {
	t.Helper()
	events, err := st.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == "stop" {
			var d map[string]any
			if err := json.Unmarshal(events[i].Data, &d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatal("no stop event")
	return nil
}

func escalationOf(t *testing.T, run store.Run) Escalation {
	t.Helper()
	var e Escalation
	if err := json.Unmarshal(run.Escalation, &e); err != nil {
		t.Fatalf("escalation %s: %v", run.Escalation, err)
	}
	return e
}

// The budget stop of the source texts: 0.014571 USD spent, the next call
// projected at 0.006006, a 0.02 budget. The run stops before the call, says
// why in its checkpoint and trace, and continues once an operator raises it.
func TestBudgetStopsBeforeTheCallThatWouldOverspend(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	m := &meteredModel{replies: []model.Response{callReply("A-1", 14571), textReply("done")}, next: 6006}
	agent := &Agent{Name: "a", Model: m, Tools: []Tool{lookupTool()}, Prices: oneDollarPerMTok,
		Budget: Budget{MaxUSD: 0.02}, MaxOutputTokens: 64}
	rt := newRuntime(t, st, nil, agent)
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "go"})

	if run.Status != store.StatusPaused || run.StopReason != "budget_usd" || m.calls != 1 {
		t.Fatalf("run %s (%s) after %d calls; want paused on budget_usd after 1", run.Status, run.StopReason, m.calls)
	}
	if run.CostNanoUSD != int64(model.USD(0.014571)) || !strings.Contains(run.StopDetail, "$0.014571") || !strings.Contains(run.StopDetail, "$0.006006") {
		t.Errorf("cost %d, detail %q", run.CostNanoUSD, run.StopDetail)
	}
	ev := stopEvent(t, st, run.ID)
	if ev["reason"] != "budget_usd" || ev["used"] != 0.014571 || ev["next_call"] != 0.006006 || ev["limit"] != 0.02 {
		t.Errorf("stop event %v", ev)
	}
	esc := escalationOf(t, run)
	if esc.Reason != "budget_usd" || len(esc.Tried) != 1 || esc.Tried[0].Tool != "lookup" || esc.Asked != "go" {
		t.Errorf("escalation %+v", esc)
	}
	out, _ := st.Outbox(context.Background(), run.ID)
	if len(out) != 1 || out[0].Kind != "escalation" {
		t.Errorf("outbox %+v", out)
	}

	if _, err := rt.Resume(context.Background(), "", run.ID, Raise{USD: 0.05}, "human:ops"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	run, _ = st.GetRun(context.Background(), "", run.ID)
	if run.Status != store.StatusDone || m.calls != 2 || run.Escalation != nil {
		t.Errorf("after raising the budget: %s after %d calls", run.Status, m.calls)
	}
}

func TestDollarBudgetNeedsAPrice(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	_, err := New(Config{Store: st, Agents: []*Agent{{Name: "a", Model: scripted.New(), Budget: Budget{MaxUSD: 1}}}})
	if err == nil || !strings.Contains(err.Error(), "needs a price") {
		t.Errorf("agent with a dollar budget and no price: %v", err)
	}
	rt := newRuntime(t, st, nil, &Agent{Name: "b", Model: scripted.New()})
	_, _, err = rt.StartRun(context.Background(), RunRequest{Agent: "b", Budget: Budget{MaxUSD: 1}})
	if err == nil || !strings.Contains(err.Error(), "count as free") {
		t.Errorf("run with a dollar budget on a model without a price: %v", err)
	}
}

func TestTurnTokenAndDeadlineLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		budget  Budget
		bound   time.Duration
		advance time.Duration
		reason  string
	}{
		{"turns", Budget{MaxTurns: 1}, 0, 0, "max_turns"},
		{"tokens", Budget{MaxInputTokens: 20000}, 0, 0, "budget_tokens"},
		{"deadline", Budget{Deadline: time.Minute}, 0, 2 * time.Minute, "deadline"},
		// A call that may take 10 minutes is not started 5 minutes before
		// the deadline.
		{"call outlives deadline", Budget{Deadline: time.Hour}, 10 * time.Minute, 55 * time.Minute, "deadline"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			c := newClock()
			m := &meteredModel{replies: []model.Response{callReply("A-1", 14571), textReply("done")}, next: 6006, bound: tc.bound}
			agent := &Agent{Name: "a", Model: m, Tools: []Tool{lookupTool()}, Prices: oneDollarPerMTok, Budget: tc.budget}
			rt := newRuntime(t, st, c, agent)
			run, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "go"})
			if err != nil {
				t.Fatal(err)
			}
			// The first turn runs; the limit bites before the second.
			m.replies[0].Usage.InputTokens = 14571
			rt.cfg.now = func() time.Time {
				if m.calls >= 1 {
					return c.Now().Add(tc.advance)
				}
				return c.Now()
			}
			if err := rt.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			run, _ = st.GetRun(ctx, "", run.ID)
			if run.Status != store.StatusPaused || run.StopReason != tc.reason || m.calls != 1 {
				t.Fatalf("run %s (%s: %s) after %d calls; want paused on %s after 1", run.Status, run.StopReason, run.StopDetail, m.calls, tc.reason)
			}
			raise := Raise{Turns: 1, InputTokens: 10000, Time: time.Hour}
			if _, err := rt.Resume(ctx, "", run.ID, raise, "human:ops"); err != nil {
				t.Fatal(err)
			}
			if err := rt.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			run, _ = st.GetRun(ctx, "", run.ID)
			if run.Status != store.StatusDone {
				t.Errorf("after raising: %s (%s: %s)", run.Status, run.StopReason, run.StopDetail)
			}
		})
	}
}

// A model that keeps asking for the same result is told once to replan; if
// it goes on, the run escalates with a packet saying what was tried.
func TestStuckRunIsToldToReplanThenEscalated(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	polls := 0
	status := NewTool("order_status", "status of an order", Read, func(ctx context.Context, in struct{}) (string, error) {
		polls++
		return "processing", nil
	})
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		return scripted.Reply{Text: "let me check again", Calls: []scripted.Call{{Name: "order_status"}}}, nil
	})
	rt := newRuntime(t, st, nil, &Agent{Name: "a", Model: m, Tools: []Tool{status}})
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "where is my order?"})
	if run.Status != store.StatusEscalated || run.StopReason != "stuck_loop" {
		t.Fatalf("run %s (%s)", run.Status, run.StopReason)
	}
	// One new fact, then four stale polls fire; four more fire again.
	if polls != 9 {
		t.Errorf("%d polls before escalation, want 9", polls)
	}
	replans := 0
	for _, msg := range loadMessages(t, st, run.ID) {
		for _, b := range msg.Content {
			if b.Type == model.TypeText && strings.HasPrefix(b.Text, "REPLAN:") {
				replans++
			}
		}
	}
	if replans != 1 {
		t.Errorf("%d REPLAN messages, want 1", replans)
	}
	esc := escalationOf(t, run)
	if len(esc.Tried) != 9 || esc.CustomerMessage != DefaultCustomerMessage || !strings.Contains(esc.Trace, run.ID) {
		t.Errorf("escalation: %d tried, message %q, trace %q", len(esc.Tried), esc.CustomerMessage, esc.Trace)
	}
}

// Polling a status that changes is progress, however long it takes.
func TestPollingThatLearnsIsNotStuck(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	polls := 0
	status := NewTool("order_status", "status of an order", Read, func(ctx context.Context, in struct{}) (string, error) {
		polls++
		return fmt.Sprintf("in transit, %d km to go", 100-10*polls), nil
	})
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) >= 21 {
			return scripted.Reply{Text: "it has arrived"}, nil
		}
		return scripted.Reply{Calls: []scripted.Call{{Name: "order_status"}}}, nil
	})
	run := startAndDrain(t, newRuntime(t, st, nil, &Agent{Name: "a", Model: m, Tools: []Tool{status}}), RunRequest{Agent: "a", User: "u", Input: "track it"})
	if run.Status != store.StatusDone || polls != 10 {
		t.Errorf("run %s (%s) after %d polls", run.Status, run.StopReason, polls)
	}
}

// Engaged, the kill switch pauses running runs at their next step and keeps
// new ones queued; released, both go on.
func TestKillSwitchPausesAndReleases(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	var rt *Runtime
	pulled := false
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) == 1 {
			if !pulled {
				// During the first run's first step, an operator pulls the
				// switch.
				pulled = true
				if err := rt.SetKillSwitch(ctx, "acme", true, "provider incident"); err != nil {
					return scripted.Reply{}, err
				}
			}
			return scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}}, nil
		}
		return scripted.Reply{Text: "done"}, nil
	})
	rt = newRuntime(t, st, nil, &Agent{Name: "a", Model: m, Tools: []Tool{lookupTool()}})
	first := startAndDrain(t, rt, RunRequest{Agent: "a", Tenant: "acme", User: "u", Input: "one"})
	if first.Status != store.StatusPaused || first.StopReason != "kill_switch" || first.Step != 1 || first.Escalation == nil {
		t.Fatalf("first run %s (%s) at step %d", first.Status, first.StopReason, first.Step)
	}
	second := startAndDrain(t, rt, RunRequest{Agent: "a", Tenant: "acme", User: "u", Input: "two"})
	if second.Status != store.StatusQueued {
		t.Fatalf("a new run is %s while the switch is engaged, want queued", second.Status)
	}
	other := startAndDrain(t, rt, RunRequest{Agent: "a", Tenant: "globex", User: "u", Input: "other tenant"})
	if other.Status == store.StatusQueued {
		t.Errorf("another tenant's run was held by acme's switch")
	}

	if err := rt.SetKillSwitch(ctx, "acme", false, ""); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first.ID, second.ID} {
		r, _ := st.GetRun(ctx, "", id)
		if r.Status != store.StatusDone {
			t.Errorf("run %s is %s (%s) after release", id, r.Status, r.StopReason)
		}
	}
}

// A run whose work is incomplete is never done, whatever the model says.
func TestUnverifiedRunEscalatesWithWhatIsMissing(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	noted := false
	agent := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Text: "All done! The refund went through and the note is in the CRM."}),
		Requirements: []Requirement{
			{Name: "order refunded", Check: func(ctx context.Context, run RunInfo) (bool, error) { return true, nil }},
			{Name: "reason in CRM", Check: func(ctx context.Context, run RunInfo) (bool, error) { return noted, nil }},
		}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "refund"})
	if run.Status != store.StatusEscalated || run.StopReason != "unverified" || run.StopDetail != `{"complete":false,"missing":["reason in CRM"]}` {
		t.Fatalf("run %s (%s) %s", run.Status, run.StopReason, run.StopDetail)
	}
	if esc := escalationOf(t, run); len(esc.Missing) != 1 || esc.Missing[0] != "reason in CRM" {
		t.Errorf("escalation missing %v", esc.Missing)
	}
	got := strings.Join(eventTypes(t, st, run.ID), " ")
	if !strings.Contains(got, "verify verify stop") {
		t.Errorf("events %s: want each check traced", got)
	}
}

// An overloaded primary degrades to the fallback for that call, and the
// trace says so; without a fallback the run pauses and says it will wait.
func TestOverloadedModelFallsBack(t *testing.T) {
	t.Parallel()
	overloaded := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		return scripted.Reply{Err: &model.Error{Class: model.ClassOverloaded, StatusCode: 529, Err: errors.New("overloaded")}}, nil
	}).Named("primary")
	backup := scripted.New(scripted.Reply{Text: "answered by the fallback"}).Named("backup")
	prices := model.PriceTable{"primary": {InputPerMTok: 1}, "backup": {InputPerMTok: 2}}

	st := openStore(t)
	run := startAndDrain(t, newRuntime(t, st, nil, &Agent{Name: "a", Model: overloaded, Fallback: backup, Prices: prices}),
		RunRequest{Agent: "a", User: "u", Input: "hi"})
	if run.Status != store.StatusDone || run.Final != "answered by the fallback" || run.CostNanoUSD == 0 {
		t.Fatalf("run %s %q, cost %d", run.Status, run.Final, run.CostNanoUSD)
	}
	if got := strings.Join(eventTypes(t, st, run.ID), " "); !strings.Contains(got, "model_fallback model_call") {
		t.Errorf("events %s", got)
	}

	st2 := openStore(t)
	run2 := startAndDrain(t, newRuntime(t, st2, nil, &Agent{Name: "a", Model: overloaded, Prices: prices}),
		RunRequest{Agent: "a", User: "u", Input: "hi"})
	if run2.Status != store.StatusPaused || run2.StopReason != "overloaded" || !strings.Contains(run2.StopDetail, "no fallback") {
		t.Errorf("without a fallback: %s (%s) %s", run2.Status, run2.StopReason, run2.StopDetail)
	}
	_, err := New(Config{Store: st2, Agents: []*Agent{{Name: "b", Model: overloaded, Fallback: backup.Named("unpriced"), Prices: prices, Budget: Budget{MaxUSD: 1}}}})
	if err == nil || !strings.Contains(err.Error(), "unpriced") {
		t.Errorf("a dollar budget with an unpriced fallback: %v", err)
	}
}

// A run paused until a time is claimed when the time comes; that timer has
// then fired. A later pause for a person (here the turn budget) must not
// carry it over, or the run would be due again at once, and claimed and
// paused over and over.
func TestFiredTimerIsNotCarriedIntoTheNextPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		calls++
		if calls == 1 {
			return scripted.Reply{Err: &model.Error{Class: model.ClassOverloaded, StatusCode: 529, Err: errors.New("overloaded")}}, nil
		}
		return scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}}, nil
	})
	st := openStore(t)
	c := newClock()
	rt := newRuntime(t, st, c, &Agent{Name: "a", Model: m, Tools: []Tool{lookupTool()}, Budget: Budget{MaxTurns: 1}})
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "look"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetRun(ctx, "", run.ID); got.StopReason != "overloaded" || got.ResumeAfter.IsZero() {
		t.Fatalf("first stop %s, resume after %v: want overloaded with a time", got.StopReason, got.ResumeAfter)
	}

	c.Advance(time.Minute)
	// Were the timer carried over, Drain would claim the run without end.
	drainCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rt.Drain(drainCtx); err != nil {
		t.Fatalf("drain after the timer: %v (the run kept coming due)", err)
	}
	got, err := st.GetRun(ctx, "", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusPaused || got.StopReason != "max_turns" || !got.ResumeAfter.IsZero() {
		t.Errorf("run %s (%s), resume after %v: want paused for max_turns, waiting for a person", got.Status, got.StopReason, got.ResumeAfter)
	}
}
