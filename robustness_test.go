// Tests of the engine's answers to what goes wrong in a step: a replayed
// turn, a policy that fails, a tool that ignores its context, a write cut
// short, a damaged store, ... One file of such cases, each small and
// independent, is easier to read than a file per case.
package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
	"github.com/belayrun/belay/store/sqlite/sqlitetest"
)

// killStore fails (as a killed process would: nothing written) the first
// checkpoint that matches, and every write of that worker after it.
type killStore struct {
	store.Store
	mu    sync.Mutex
	match func(p store.CheckpointParams) bool
	dead  bool
}

var errKilled = errors.New("worker killed")

func (s *killStore) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	s.mu.Lock()
	if !s.dead && s.match != nil && s.match(p) {
		s.dead = true
	}
	dead := s.dead
	s.mu.Unlock()
	if dead {
		return errKilled
	}
	return s.Store.Checkpoint(ctx, p)
}

func (s *killStore) RenewLease(ctx context.Context, f store.Fence, e time.Time) error {
	s.mu.Lock()
	dead := s.dead
	s.mu.Unlock()
	if dead {
		return errKilled
	}
	return s.Store.RenewLease(ctx, f, e)
}

// A turn run again after a crash finds its own effects in the ledger; the
// policy's Prior must not count them, or a totals policy would ask a person
// about a refund already made (and a rejection would tell the model it was
// NOT executed).
func TestReplayedTurnIsGatedAsTheFirstTime(t *testing.T) {
	st := openStore(t)
	c := newClock()
	w := &approvalWorld{}
	total := refundsOver300
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		n := len(req.Messages) / 2
		if n < 3 { // three refunds of 100: exactly at the cap, none needs a person
			return scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundArgs{ChargeID: "CH-" + string(rune('1'+n)), Amount: 100}}}}, nil
		}
		return scripted.Reply{Text: "done"}, nil
	})
	newRT := func(s store.Store) *Runtime {
		agent := &Agent{Name: "a", Version: "v1", Model: m, Tools: w.tools(), Policy: total, PolicyVersion: "totals-v1"}
		rt, err := New(Config{Store: s, Agents: []*Agent{agent}, HumanApproval: true})
		if err != nil {
			t.Fatal(err)
		}
		rt.cfg.now = c.Now
		return rt
	}
	// The worker dies after the third refund is settled in the ledger, before
	// the checkpoint that carries its result (the next model response).
	dying := &killStore{Store: st, match: func(p store.CheckpointParams) bool {
		return p.Run.Step == 3 && len(p.Messages) > 0
	}}
	run, _, err := newRT(dying).StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "refund"})
	if err != nil {
		t.Fatal(err)
	}
	_ = newRT(dying).Drain(context.Background())
	if refunds, _ := w.counts(); refunds != 3 {
		t.Fatalf("%d refunds before the crash, want 3", refunds)
	}
	c.Advance(time.Minute) // the dead worker's lease expires
	rt := newRT(st)
	if err := rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetRun(context.Background(), "", run.ID)
	pending, _ := st.Approvals(context.Background(), store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
	if got.Status != store.StatusDone || len(pending) != 0 {
		t.Errorf("after the replay: run %s with %d pending approval(s) %v; want done, nobody asked (the refund was made and was within the cap)",
			got.Status, len(pending), pending)
	}
	if len(pending) == 1 {
		if _, err := rt.Decide(context.Background(), "default", pending[0].ID, ApprovalDecision{Verdict: "reject", By: "human:maya", Note: "too much"}); err != nil {
			t.Fatal(err)
		}
		_ = rt.Drain(context.Background())
		msgs := loadMessages(t, st, run.ID)
		res := msgs[6].Content[0]
		t.Errorf("the model is told %q; refunds actually made: %d", res.Content[:90], len(w.refunds))
	}
}

// A timeout of a side effect that does not honour keys is an unknown
// outcome even when the tool's error (as most HTTP wrappers do) also calls
// the failure transient: it is never retried blind.
func TestTransientTimeoutOfASideEffectIsNotRetried(t *testing.T) {
	st := openStore(t)
	var landed atomic.Int32
	charge := Tool{Name: "charge", Effect: Irreversible, Timeout: lostCallTimeout,
		Retry: RetryPolicy{BaseDelay: time.Millisecond},
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			landed.Add(1) // the charge lands downstream...
			<-ctx.Done()  // ...and the response never comes back
			return nil, Transient(ctx.Err())
		}}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "charge", Args: map[string]any{"card": "C-1", "cents": 2900}}}},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{charge}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "charge"})
	effs := effectsOf(t, st, run.ID)
	if n := landed.Load(); n != 1 || run.StopReason != "unknown_outcome" {
		t.Errorf("%d charges landed; run %s (%s); ledger state %s; want 1 charge and a pause on the unknown outcome",
			n, run.Status, run.StopReason, effs[0].State)
	}
}

// A shutdown that cancels the worker while it persists a turn's approvals:
// the release must not write status waiting_approval without the approvals,
// or the run would wait for a decision nobody can take.
func TestCanceledApprovalRequestLeavesNoHalfWrittenRun(t *testing.T) {
	st := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &approvalWorld{}
	tools := w.tools()
	for i := range tools {
		if tools[i].Name == "refund" {
			// stands in for SIGTERM with an expired Stop deadline arriving
			// between the policy and the checkpoint
			tools[i].Summarize = func(json.RawMessage) string { cancel(); return "refund CH-2" }
		}
	}
	agent := &Agent{Name: "a", Model: turnWithRefund(), Tools: tools}
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "refund"})
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Drain(ctx)
	got, _ := st.GetRun(context.Background(), "", run.ID)
	all, _ := st.Approvals(context.Background(), store.ListApprovalsParams{RunID: run.ID})
	if got.Status == store.StatusWaitingApproval && len(all) == 0 {
		t.Errorf("run %s (%s) with %d approvals: nobody can ever decide it", got.Status, got.StopDetail, len(all))
	}
}

// A runtime claims only runs of its own agents: a run of another agent is
// left for a worker that has it, not held for a lease TTL again and again.
func TestRunOfAnotherAgentIsNotClaimed(t *testing.T) {
	st := openStore(t)
	c := newClock()
	a := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Text: "hi"})}
	other := &Agent{Name: "b", Model: scripted.New(scripted.Reply{Text: "hi"})}
	rtA := newRuntime(t, st, c, a)
	rtB := newRuntime(t, st, c, other)
	run, _, err := rtA.StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_ = rtB.Drain(context.Background())
		c.Advance(31 * time.Second)
	}
	got, _ := st.GetRun(context.Background(), "", run.ID)
	if got.Status == store.StatusRunning && got.LeaseEpoch >= 3 {
		t.Errorf("run %s, epoch %d, owner %s: claimed %d times by a runtime without its agent, never run, never surfaced",
			got.Status, got.LeaseEpoch, got.LeaseOwner, got.LeaseEpoch)
	}
}

// The fallback model's call is checked against the budget at its own price.
func TestFallbackModelIsBudgeted(t *testing.T) {
	st := openStore(t)
	overloaded := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		return scripted.Reply{Err: &model.Error{Class: model.ClassOverloaded, StatusCode: 529, Err: errors.New("overloaded")}}, nil
	}).Named("cheap")
	backup := scripted.New(scripted.Reply{Text: "answered"}).Named("pricey")
	prices := model.PriceTable{"cheap": {InputPerMTok: 0.01, OutputPerMTok: 0.01}, "pricey": {InputPerMTok: 1e6, OutputPerMTok: 1e6}}
	agent := &Agent{Name: "a", Model: overloaded, Fallback: backup, Prices: prices, Budget: Budget{MaxUSD: 0.01}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "hi"})
	if spent := model.Nanodollars(run.CostNanoUSD).Dollars(); spent > 0.01 {
		t.Errorf("spent $%.4f on a $0.01 budget (status %s)", spent, run.Status)
	}
}

// The intent's write carries every event queued before it in the step
// (tool_call, earlier tool_results). When it is refused (same key, other
// arguments), those events still reach the trace.
func TestRefusedKeyKeepsTheStepsTrace(t *testing.T) {
	st := openStore(t)
	p := &payments{}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundArgs{ChargeID: "CH-2", Amount: 29, Reason: "duplicate"}}}},
		scripted.Reply{Calls: []scripted.Call{
			{Name: "lookup", Args: map[string]string{"id": "A-1"}},
			{Name: "refund", Args: refundArgs{ChargeID: "CH-2", Amount: 29, Reason: "customer asked again"}}}},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{refundTool(p, false), lookupTool()}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "refund"})
	evs, _ := st.Events(context.Background(), run.ID)
	calls, results := 0, 0
	for _, e := range evs {
		if e.Step == 1 && e.Type == "tool_call" {
			calls++
		}
		if e.Step == 1 && e.Type == "tool_result" {
			results++
		}
	}
	if calls != 2 || results != 2 {
		t.Errorf("step 1 trace: %d tool_call and %d tool_result events, want 2 and 2 (%v)", calls, results, eventTypes(t, st, run.ID))
	}
}

// A step that fails the same way each time (a policy without a verdict)
// pauses the run for a person instead of failing again after every lease
// TTL, for ever.
func TestFailingPolicyPausesTheRun(t *testing.T) {
	st := openStore(t)
	c := newClock()
	agent := &Agent{Name: "a", Model: scripted.Func(func(req model.Request) (scripted.Reply, error) {
		return scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}}, nil
	}), Tools: []Tool{lookupTool()}, PolicyVersion: "p1",
		Policy: func(context.Context, PolicyCall) (Decision, error) { return Decision{}, nil }}
	rt := newRuntime(t, st, c, agent)
	run, _, _ := rt.StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "x"})
	for range 4 {
		_ = rt.Drain(context.Background())
		c.Advance(31 * time.Second)
	}
	got, _ := st.GetRun(context.Background(), "", run.ID)
	if got.Status != store.StatusPaused || got.StopReason != "step_failed" || got.LeaseEpoch != 1 {
		t.Errorf("run %s (%s) after %d claims, want paused for a person (step_failed) after the first", got.Status, got.StopReason, got.LeaseEpoch)
	}
	if !strings.Contains(got.StopDetail, "verdict") {
		t.Errorf("stop detail %q does not say what failed", got.StopDetail)
	}
	var packet Escalation
	if err := json.Unmarshal(got.Escalation, &packet); err != nil || packet.Reason != "step_failed" || packet.Detail != got.StopDetail {
		t.Errorf("escalation packet %s (%v), want one for step_failed with the stop detail", got.Escalation, err)
	}
}

// A released kill switch puts the runs it paused back in the queue; a
// runtime that saw it engaged a moment ago must not pause them again.
func TestReleasedKillSwitchIsSeenAtOnce(t *testing.T) {
	st := openStore(t)
	c := newClock()
	agent := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Text: "hi"})}
	rt := newRuntime(t, st, c, agent)
	ctx := context.Background()
	run, _, _ := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "x"})
	claimed, _ := st.ClaimRuns(ctx, store.ClaimRunsParams{Owner: rt.Owner(), Now: c.Now(), TTL: time.Minute, Limit: 1})
	if err := rt.SetKillSwitch(ctx, "", true, "incident"); err != nil {
		t.Fatal(err)
	}
	rt.execute(ctx, claimed[0], false) // caches "engaged", pauses the run
	// released elsewhere (the CLI, another server) within the poll interval
	if err := SetKillSwitch(ctx, st, "", false, ""); err != nil {
		t.Fatal(err)
	}
	_ = rt.Drain(ctx)
	got, _ := st.GetRun(ctx, "", run.ID)
	if got.Status != store.StatusDone {
		t.Errorf("run %s (%s) after the switch was released; trace %v", got.Status, got.StopReason, eventTypes(t, st, run.ID))
	}
}

type panickyModel struct{}

func (panickyModel) Name() string { return "panicky" }
func (panickyModel) Generate(context.Context, model.Request) (model.Response, error) {
	var m map[string]int
	m["x"]++ // e.g. an adapter meeting an unexpected response shape
	panic("unreachable")
}

// A panic in the model (or a policy, a reconcile, a requirement's check)
// pauses its run; it does not kill the worker process with every run in
// flight on it.
func TestModelPanicPausesTheRunNotTheProcess(t *testing.T) {
	if os.Getenv("BELAY_PANIC_CHILD") == "1" {
		st := openStore(t)
		other := &Agent{Name: "b", Model: scripted.New(scripted.Reply{Text: "hi"})}
		rt := newRuntime(t, st, nil, &Agent{Name: "a", Model: panickyModel{}}, other)
		run, _, _ := rt.StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "x"})
		_ = rt.Drain(context.Background())
		got, _ := st.GetRun(context.Background(), "", run.ID)
		fmt.Println("SURVIVED", got.Status, got.StopReason)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestModelPanicPausesTheRunNotTheProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BELAY_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if !strings.Contains(string(out), "SURVIVED paused step_failed") {
		t.Errorf("worker process died (%v): %s", err, firstLines(string(out), 3))
	}
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, " | ")
}

// A tool that does not watch its context (a blocking read without a
// deadline) is given up on shortly after its timeout instead of holding the
// step, and the lease with it.
func TestToolIgnoringItsContextIsAbandoned(t *testing.T) {
	st := openStore(t)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	slow := Tool{Name: "slow", Timeout: 20 * time.Millisecond, Retry: RetryPolicy{MaxAttempts: 1},
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			<-stuck // ignores ctx
			return json.RawMessage(`{}`), nil
		}}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "slow", Args: map[string]any{}}}},
		scripted.Reply{Text: "done"}), Tools: []Tool{slow}}
	// Without the abandonment, the drain would never end: the deadline
	// fails the test instead of hanging it.
	done := make(chan store.Run, 1)
	go func() {
		done <- startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "x"})
	}()
	select {
	case run := <-done:
		if run.Status != store.StatusDone {
			t.Errorf("run %s (%s), want done with the timeout as the tool's result", run.Status, run.StopReason)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a tool with a 20ms timeout still holds the step after 30s")
	}
}

// A turn of two refunds, the second's outcome unknown; a person resolves it
// as applied, and the turn, run again, is not gated on its own refunds.
func TestResolvedTurnIsNotGatedAgain(t *testing.T) {
	st := openStore(t)
	capPolicy := func(ctx context.Context, call PolicyCall) (Decision, error) {
		n := 0
		for range call.Prior {
			n++
		}
		if n+1 > 2 { // at most two refunds in a run
			return Decision{Verdict: NeedsApproval, Reason: "more than two refunds", Category: "refund_count"}, nil
		}
		return Decision{Verdict: Allow}, nil
	}
	calls := 0
	refund := NewTool("refund", "refund", Irreversible, func(ctx context.Context, in refundArgs) (json.RawMessage, error) {
		calls++
		if in.ChargeID == "CH-B" {
			return nil, fmt.Errorf("no response: %w", ErrUnknownOutcome)
		}
		return json.RawMessage(`{"ok":true}`), nil
	})
	refund.KeyFields = []string{"charge_id", "amount"}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{refundCall("CH-A", 10), refundCall("CH-B", 10)}},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{refund}, Policy: capPolicy, PolicyVersion: "cap-v1"}
	rt, _ := New(Config{Store: st, Agents: []*Agent{agent}, HumanApproval: true})
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "refund both"})
	if run.StopReason != "unknown_outcome" {
		t.Fatalf("run %s (%s)", run.Status, run.StopReason)
	}
	var key string
	for _, e := range effectsOf(t, st, run.ID) {
		if e.State == store.EffectUnknown {
			key = e.Key
		}
	}
	if _, err := ResolveOutcome(context.Background(), st, "", run.ID, Outcome{Key: key, Applied: true}, "human:ops"); err != nil {
		t.Fatal(err)
	}
	_ = rt.Drain(context.Background())
	got, _ := st.GetRun(context.Background(), "", run.ID)
	pending, _ := st.Approvals(context.Background(), store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
	if got.Status != store.StatusDone {
		t.Errorf("run %s with %d approvals pending for refunds already made (%d calls); want done", got.Status, len(pending), calls)
	}
}

// lateCommitStore commits the checkpoint that matches, then ends the
// worker's context and reports the connection lost: the outcome a worker
// cannot know, as when a shutdown's deadline passes and the connection
// breaks as the commit reaches the server.
type lateCommitStore struct {
	store.Store
	match  func(p store.CheckpointParams) bool
	cancel context.CancelFunc
	hit    atomic.Bool
}

func (s *lateCommitStore) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if s.hit.Load() || !s.match(p) {
		return s.Store.Checkpoint(ctx, p)
	}
	s.hit.Store(true)
	if err := s.Store.Checkpoint(context.WithoutCancel(ctx), p); err != nil {
		return err
	}
	s.cancel()
	return errors.New("connection reset by peer")
}

// A write whose outcome is unknown may have committed: a shutdown does not
// release the run with the state from before it, which would undo it (and
// write its events twice); the lease runs out and the next worker reads the
// store.
func TestWriteCutShortIsNotUndoneByTheRelease(t *testing.T) {
	st := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	late := &lateCommitStore{Store: st, cancel: cancel,
		match: func(p store.CheckpointParams) bool { return p.Run.Step == 1 && len(p.Messages) > 0 }}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}},
		scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-2"}}}},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{lookupTool()}}
	rt := newRuntime(t, late, nil, agent)
	run, _, err := rt.StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Drain(ctx)
	if !late.hit.Load() {
		t.Fatal("the late commit never happened")
	}
	got, _ := st.GetRun(context.Background(), "", run.ID)
	msgs := loadMessages(t, st, run.ID)
	if got.Step != 1 || got.Messages != len(msgs) {
		t.Errorf("run at step %d with %d messages counted and %d stored, want step 1 and the counts equal", got.Step, got.Messages, len(msgs))
	}
	seen := map[string]int{}
	for _, typ := range eventTypes(t, st, run.ID) {
		seen[typ]++
	}
	if seen["released"] != 0 || seen["checkpoint"] != 1 {
		t.Errorf("trace %v: want no release and each checkpoint once", eventTypes(t, st, run.ID))
	}
}

// A dry run answers a write with what it would have done, and that answer
// (a message, a trace event) names no sensitive value.
func TestDryRunAnswerIsRedacted(t *testing.T) {
	st := openStore(t)
	const secret = "sk_live_dry_9f3a"
	save := Tool{Name: "save_credential", Effect: Write, Sensitive: []string{"token"},
		Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			t.Error("a dry run called the tool")
			return json.RawMessage(`{}`), nil
		}}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "save_credential", Args: map[string]string{"customer": "ada", "token": secret}}}},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{save}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "x", DryRun: true})
	msgs := loadMessages(t, st, run.ID)
	answer := msgs[2].Content[0]
	if answer.Type != model.TypeToolResult || !strings.Contains(answer.Content, "would_have") {
		t.Fatalf("message 2 is %+v, want the dry run's answer", answer)
	}
	if strings.Contains(answer.Content, secret) || !strings.Contains(answer.Content, "ada") {
		t.Errorf("dry-run answer %s: want the customer shown and the token redacted", answer.Content)
	}
	evs, _ := st.Events(context.Background(), run.ID)
	for _, e := range evs {
		if strings.Contains(string(e.Data), secret) {
			t.Errorf("%s event shows the token: %s", e.Type, e.Data)
		}
	}
}

// An escalation in the middle of a turn tells what the turn did so far: a
// call that ran before the one whose outcome is unknown is not "not run".
func TestEscalationInATurnTellsWhatRan(t *testing.T) {
	st := openStore(t)
	refunds := 0
	refund := NewTool("refund", "refund", Write, func(ctx context.Context, in struct {
		ID string `json:"id"`
	}) (string, error) {
		refunds++
		return "refunded", nil
	})
	email := NewTool("email", "email", Write, func(ctx context.Context, in struct {
		To string `json:"to"`
	}) (string, error) {
		return "", ErrUnknownOutcome
	})
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: map[string]string{"id": "CH-1"}}, {Name: "email", Args: map[string]string{"to": "ada"}}}},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{refund, email}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "hi"})
	var p Escalation
	if err := json.Unmarshal(run.Escalation, &p); err != nil || run.StopReason != "unknown_outcome" || refunds != 1 {
		t.Fatalf("run %s (%s), %d refunds, packet %s (%v)", run.Status, run.StopReason, refunds, run.Escalation, err)
	}
	got := map[string]string{}
	for _, c := range p.Tried {
		got[c.Tool] = c.Outcome
	}
	if !strings.HasPrefix(got["refund"], "ok: ") || !strings.HasPrefix(got["email"], "outcome unknown") {
		t.Errorf("packet says refund %q and email %q; want the refund ok and the email's outcome unknown", got["refund"], got["email"])
	}
}

// A turn that ran out of output tokens in the middle of a tool call runs
// none of its calls: the arguments may be cut short (a provider's stream
// closes them as {}), and the model is told to call again.
func TestCutOffTurnRunsNoCall(t *testing.T) {
	st := openStore(t)
	ran := 0
	closeAll := NewTool("close_tickets", "close tickets", Write, func(ctx context.Context, in struct {
		IDs []string `json:"ticket_ids,omitempty"`
	}) (string, error) {
		ran++
		return "closed", nil
	})
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "close_tickets", Args: map[string]any{}}}, StopReason: model.StopMaxTokens},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{closeAll}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "close T-1"})
	msgs := loadMessages(t, st, run.ID)
	if ran != 0 || run.Status != store.StatusDone || !msgs[2].Content[0].IsError || !strings.Contains(msgs[2].Content[0].Content, "cut off") {
		t.Errorf("tool ran %d times, run %s, result %+v; want no run and the model told its call was cut off", ran, run.Status, msgs[2].Content[0])
	}
}

// A run of an agent with no requirements ends done, but does not say it
// was verified: nothing looked at the world.
func TestDoneWithoutRequirementsIsNotCalledVerified(t *testing.T) {
	st := openStore(t)
	agent := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Text: "I refunded you."})}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "refund me"})
	if run.Status != store.StatusDone || run.StopReason != "no_requirements" {
		t.Errorf("run %s (%s), want done with stop reason no_requirements", run.Status, run.StopReason)
	}
	withCheck := &Agent{Name: "b", Model: scripted.New(scripted.Reply{Text: "I refunded you."}),
		Requirements: []Requirement{{Name: "refunded", Check: func(context.Context, RunInfo) (bool, error) { return true, nil }}}}
	run = startAndDrain(t, newRuntime(t, st, nil, withCheck), RunRequest{Agent: "b", User: "u", Input: "refund me"})
	if run.Status != store.StatusDone || run.StopReason != "verified" {
		t.Errorf("run with its requirement met: %s (%s), want done, verified", run.Status, run.StopReason)
	}
}

// An empty answer is billed and counted like any other.
func TestEmptyResponseIsCounted(t *testing.T) {
	st := openStore(t)
	empty := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		return scripted.Reply{Content: []model.Block{}}, nil
	})
	agent := &Agent{Name: "a", Model: empty}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "hi"})
	if run.StopReason != "empty_response" || run.ModelCalls != 1 || run.InputTokens == 0 {
		t.Errorf("run %s (%s): %d model calls, %d input tokens; want the empty call counted", run.Status, run.StopReason, run.ModelCalls, run.InputTokens)
	}
}

// eventLog is an Observer that keeps the types of the events it is told.
type eventLog struct {
	mu    sync.Mutex
	types []string
}

func (l *eventLog) Event(_ ObservedRun, ev store.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.types = append(l.types, ev.Type)
}
func (l *eventLog) Checkpoint(ObservedRun, time.Duration) {}

// The observer (traces, metrics) hears of every durable event, those of a
// pause for a failed step and of a release included: a span left open
// there was reused by the run's next step.
func TestObserverHearsPausesAndReleases(t *testing.T) {
	st := openStore(t)
	log := &eventLog{}
	agent := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}}),
		Tools: []Tool{lookupTool()}, PolicyVersion: "p1",
		Policy: func(context.Context, PolicyCall) (Decision, error) { return Decision{}, nil }}
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}, Observer: log})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Drain(context.Background())
	stored := eventTypes(t, st, run.ID)
	log.mu.Lock()
	defer log.mu.Unlock()
	if stored[len(stored)-1] != "stop" || !slices.Contains(log.types, "stop") {
		t.Errorf("stored %v, observed %v: want the pause's stop event observed", stored, log.types)
	}
}

// A model that keeps failing for a reason waiting may cure (its answer lost
// on the way, say, and billed all the same) is called again after waits that
// double, and after maxModelFailures in a row the run waits for a person.
func TestFailingModelBacksOffThenWaitsForAPerson(t *testing.T) {
	st := openStore(t)
	c := newClock()
	calls := 0
	lost := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		calls++
		return scripted.Reply{Err: &model.Error{Class: model.ClassNetwork, Err: errors.New("stream cut short")}}, nil
	})
	rt := newRuntime(t, st, c, &Agent{Name: "a", Model: lost})
	rt.cfg.rand = func(n int64) int64 { return n - 1 } // each wait the longest of its window
	run, _, err := rt.StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	for range maxModelFailures + 2 {
		_ = rt.Drain(context.Background())
		got, _ := st.GetRun(context.Background(), "", run.ID)
		if got.ResumeAfter.IsZero() {
			break
		}
		waits = append(waits, got.ResumeAfter.Sub(c.Now()))
		c.Advance(got.ResumeAfter.Sub(c.Now()))
	}
	got, _ := st.GetRun(context.Background(), "", run.ID)
	if calls != maxModelFailures || got.Status != store.StatusPaused || got.StopReason != "model_unavailable" || len(got.Escalation) == 0 {
		t.Fatalf("%d calls, run %s (%s); want %d calls, then paused for a person with a packet", calls, got.Status, got.StopReason, maxModelFailures)
	}
	if waits[0] != modelRetryBase || waits[1] != 2*modelRetryBase || waits[len(waits)-1] != modelRetryMax {
		t.Errorf("waits %v: want %v doubling up to %v", waits, modelRetryBase, modelRetryMax)
	}
}

// A runtime whose store finds its file damaged stops claiming: every claim
// would fail the same way, and nothing may be written to the file. It says
// so once, and its claim loop ends.
func TestRuntimeStopsClaimingOnADamagedStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "belay.db")
	st, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sqlitetest.CreateRuns(t, st, 300)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	sqlitetest.DamageInterior(t, path, "runs")
	if st, err = sqlite.Open(ctx, path, sqlite.Config{}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs := &lockedBuffer{}
	agent := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Text: "done"}), Policy: allowAll, PolicyVersion: "allow-all"}
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}, PollInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rt.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, rt, 5*time.Second)
	ended := make(chan struct{})
	go func() { rt.loopsWG.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-runCtx.Done():
		t.Fatalf("the claim loop goes on over a damaged store; log:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "claims no more runs"); n != 1 {
		t.Errorf("the runtime said %d times that it claims no more; log:\n%s", n, logs.String())
	}
}

// lockedBuffer is a log written by several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
