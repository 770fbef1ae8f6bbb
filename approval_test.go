package belay

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// approvalWorld is a payment system and a mailbox that record every call
// that reached them.
type approvalWorld struct {
	mu      sync.Mutex
	refunds []refundArgs
	keys    map[string]int // idempotency key -> refund number
	emails  int
	// afterRefund, if set, runs once a refund has landed.
	afterRefund func()
}

func (w *approvalWorld) tools() []Tool {
	refund := NewTool("refund", "refund a charge", Irreversible, func(ctx context.Context, in refundArgs) (map[string]any, error) {
		ci, _ := CallInfoFrom(ctx)
		w.mu.Lock()
		if n, ok := w.keys[ci.IdempotencyKey]; ok {
			// The payment system honours keys: the same key is the same refund.
			w.mu.Unlock()
			return map[string]any{"refund_id": n, "amount": in.Amount}, nil
		}
		w.refunds = append(w.refunds, in)
		n := len(w.refunds)
		if w.keys == nil {
			w.keys = map[string]int{}
		}
		w.keys[ci.IdempotencyKey] = n
		hook := w.afterRefund
		w.mu.Unlock()
		if hook != nil {
			hook()
		}
		return map[string]any{"refund_id": n, "amount": in.Amount}, nil
	})
	refund.KeyFields = []string{"charge_id", "amount"}
	refund.HonorsKey = true
	lookup := lookupTool()
	note := NewTool("note", "add a note", Write, func(ctx context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		w.mu.Lock()
		w.emails++
		w.mu.Unlock()
		return "saved", nil
	})
	return []Tool{refund, lookup, note}
}

func (w *approvalWorld) counts() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.refunds), w.emails
}

// turnWithRefund is one turn of three calls, one of which (the refund)
// needs approval under DefaultPolicy, then a final answer that repeats the
// results it saw.
func turnWithRefund() *scripted.Model {
	return scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) == 1 {
			return scripted.Reply{Text: "PLAN: look up; refund; note", Calls: []scripted.Call{
				{Name: "lookup", Args: map[string]string{"id": "A-1"}},
				{Name: "refund", Args: refundArgs{ChargeID: "CH-2", Amount: 288}},
				{Name: "note", Args: map[string]string{"text": "refunded CH-2"}},
			}}, nil
		}
		last := req.Messages[len(req.Messages)-1]
		var parts []string
		for _, b := range last.Content {
			parts = append(parts, b.Content)
		}
		return scripted.Reply{Text: strings.Join(parts, " | ")}, nil
	})
}

type approvalFixture struct {
	st    store.Store
	clock *clock
	world *approvalWorld
	rt    *Runtime
	run   store.Run
}

func newApprovalFixture(t *testing.T) *approvalFixture {
	t.Helper()
	f := &approvalFixture{st: openStore(t), clock: newClock(), world: &approvalWorld{}}
	f.rt = f.runtime(t, "default")
	run, _, err := f.rt.StartRun(context.Background(), RunRequest{Agent: "a", Tenant: "acme", User: "ada", Input: "refund my duplicate charge"})
	if err != nil {
		t.Fatal(err)
	}
	f.run = run
	return f
}

// runtime is a fresh runtime over the fixture's store, as after a restart.
func (f *approvalFixture) runtime(t *testing.T, policyVersion string) *Runtime {
	t.Helper()
	agent := &Agent{Name: "a", Version: "v1", Model: turnWithRefund(), Tools: f.world.tools(),
		Policy: DefaultPolicy, PolicyVersion: policyVersion}
	rt, err := New(Config{Store: f.st, Agents: []*Agent{agent}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	rt.cfg.now = f.clock.Now
	return rt
}

func (f *approvalFixture) drain(t *testing.T, rt *Runtime) store.Run {
	t.Helper()
	if err := rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	run, err := f.st.GetRun(context.Background(), "acme", f.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func (f *approvalFixture) pending(t *testing.T) []store.Approval {
	t.Helper()
	as, err := f.st.Approvals(context.Background(), store.ListApprovalsParams{RunID: f.run.ID, Status: store.ApprovalPending})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// waitForApproval drains until the turn stops for the refund's approval and
// checks that nothing of the turn ran.
func (f *approvalFixture) waitForApproval(t *testing.T) store.Approval {
	t.Helper()
	run := f.drain(t, f.rt)
	if run.Status != store.StatusWaitingApproval || run.LeaseOwner != "" {
		t.Fatalf("run %s (owner %q), want waiting_approval with no lease held", run.Status, run.LeaseOwner)
	}
	if refunds, notes := f.world.counts(); refunds != 0 || notes != 0 {
		t.Fatalf("%d refunds and %d notes ran before the approval", refunds, notes)
	}
	if msgs := loadMessages(t, f.st, f.run.ID); len(msgs) != 2 {
		t.Fatalf("%d messages while waiting; want the question and the turn only", len(msgs))
	}
	pending := f.pending(t)
	if len(pending) != 1 || pending[0].Tool != "refund" || pending[0].Status != store.ApprovalPending {
		t.Fatalf("pending approvals %+v", pending)
	}
	a := pending[0]
	if !strings.Contains(a.Summary, "refund") || !strings.Contains(string(a.Args), "CH-2") || a.Reason != "refund cannot be undone" ||
		!a.ExpiresAt.Equal(f.clock.Now().Add(DefaultApprovalTTL)) || a.PolicyVersion != "default" {
		t.Errorf("approval %+v", a)
	}
	out, _ := f.st.Outbox(context.Background(), f.run.ID)
	if len(out) != 1 || out[0].Kind != "approval_requested" || !strings.Contains(string(out[0].Payload), a.ID) {
		t.Errorf("outbox %+v", out)
	}
	return a
}

// resultsMessage is the one message carrying every result of the turn.
func (f *approvalFixture) resultsMessage(t *testing.T) []model.Block {
	t.Helper()
	msgs := loadMessages(t, f.st, f.run.ID)
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want question, turn, results, answer", len(msgs))
	}
	if len(msgs[2].Content) != 3 {
		t.Fatalf("results message has %d blocks, want the 3 results of the turn", len(msgs[2].Content))
	}
	return msgs[2].Content
}

func TestApproveRunsTheWholeTurnInOneMessage(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	if _, err := f.rt.Decide(context.Background(), "acme", a.ID, ApprovalDecision{Verdict: "approve", By: "human:maya"}); err != nil {
		t.Fatal(err)
	}
	run := f.drain(t, f.rt)
	if run.Status != store.StatusDone {
		t.Fatalf("run %s (%s)", run.Status, run.StopDetail)
	}
	if refunds, notes := f.world.counts(); refunds != 1 || notes != 1 {
		t.Errorf("%d refunds, %d notes; want 1 and 1", refunds, notes)
	}
	res := f.resultsMessage(t)
	if res[1].IsError || !strings.Contains(res[1].Content, "refund_id") {
		t.Errorf("refund result %+v", res[1])
	}
	decided, _ := f.st.GetApproval(context.Background(), "", a.ID)
	if decided.DecidedBy != "human:maya" || decided.DecidedAt.IsZero() {
		t.Errorf("decision not recorded: %+v", decided)
	}
}

func TestEditRunsTheEditedArgumentsAndKeepsTheOriginals(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	ctx := context.Background()
	if _, err := f.rt.Decide(ctx, "acme", a.ID, ApprovalDecision{Verdict: "edit", By: "human:maya", EditedArgs: json.RawMessage(`{"charge_id":"CH-2","amount":"lots"}`)}); err == nil {
		t.Fatal("an edit that does not fit the schema was accepted")
	}
	edited := json.RawMessage(`{"charge_id":"CH-2","amount":100}`)
	if _, err := f.rt.Decide(ctx, "acme", a.ID, ApprovalDecision{Verdict: "edit", By: "human:maya", EditedArgs: edited, Note: "partial refund"}); err != nil {
		t.Fatal(err)
	}
	if run := f.drain(t, f.rt); run.Status != store.StatusDone {
		t.Fatalf("run %s", run.Status)
	}
	f.world.mu.Lock()
	got := f.world.refunds
	f.world.mu.Unlock()
	if len(got) != 1 || got[0].Amount != 100 {
		t.Fatalf("refunds %+v, want one of 100", got)
	}
	rec, _ := f.st.GetApproval(ctx, "", a.ID)
	if rec.Status != store.ApprovalEdited || string(rec.EditedArgs) != string(edited) || !strings.Contains(string(rec.Args), "288") {
		t.Errorf("record %+v: want the edit beside the original arguments", rec)
	}
}

func TestRejectionReachesTheModelAndNothingRuns(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	if _, err := f.rt.Decide(context.Background(), "acme", a.ID, ApprovalDecision{Verdict: "reject", By: "human:maya", Note: "the charge is disputed"}); err != nil {
		t.Fatal(err)
	}
	f.drain(t, f.rt)
	if refunds, notes := f.world.counts(); refunds != 0 || notes != 1 {
		t.Errorf("%d refunds, %d notes; want the refund not run and the allowed note run", refunds, notes)
	}
	res := f.resultsMessage(t)[1]
	if !res.IsError || !strings.Contains(res.Content, "the charge is disputed") || !strings.Contains(res.Content, "NOT executed") {
		t.Errorf("rejection result %+v", res)
	}
}

// The expiry is a durable timer: a runtime started after the restart, on
// the same store, expires the approval and the model is told to escalate.
func TestApprovalExpiresAfterARestart(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	f.clock.Advance(DefaultApprovalTTL + time.Second)
	restarted := f.runtime(t, "default")
	if _, err := restarted.Decide(context.Background(), "acme", a.ID, ApprovalDecision{Verdict: "approve", By: "human:late"}); !errors.Is(err, store.ErrDecided) {
		t.Errorf("a decision after expiry: %v, want ErrDecided", err)
	}
	run := f.drain(t, restarted)
	if run.Status != store.StatusEscalated || run.StopReason != "approval_expired" || run.Escalation == nil {
		t.Fatalf("run %s (%s), want escalated with a packet after the model answered", run.Status, run.StopReason)
	}
	res := f.resultsMessage(t)[1]
	if !res.IsError || res.Content != "Approval timed out. Escalate to a human agent." {
		t.Errorf("expired result %+v", res)
	}
	if refunds, _ := f.world.counts(); refunds != 0 {
		t.Errorf("%d refunds after expiry", refunds)
	}
	rec, _ := f.st.GetApproval(context.Background(), "", a.ID)
	if rec.Status != store.ApprovalExpired || rec.DecidedBy != "policy:expiry" {
		t.Errorf("record %+v", rec)
	}
}

func TestConcurrentDecisionsOneWins(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			verdict := []string{"approve", "reject"}[i%2]
			_, errs[i] = f.rt.Decide(context.Background(), "acme", a.ID, ApprovalDecision{Verdict: verdict, By: "human:" + verdict})
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrDecided):
			t.Errorf("a losing decision failed with %v, want ErrDecided", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d decisions won, want exactly 1", wins)
	}
}

// An approval covers the call it was made for: after the policy changed,
// the approved call does not run and the model is told why.
func TestApprovalDoesNotCoverAChangedPolicy(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	if _, err := f.rt.Decide(context.Background(), "acme", a.ID, ApprovalDecision{Verdict: "approve", By: "human:maya"}); err != nil {
		t.Fatal(err)
	}
	f.drain(t, f.runtime(t, "stricter-v2"))
	if refunds, _ := f.world.counts(); refunds != 0 {
		t.Fatalf("%d refunds under an approval of another policy version", refunds)
	}
	if res := f.resultsMessage(t)[1]; !res.IsError || !strings.Contains(res.Content, "approved under another policy") || !strings.Contains(res.Content, "escalate to a person") {
		t.Errorf("result %+v", res)
	}
}

// The worker dies after the approval and while the refund is in flight; the
// next one finds the approval (nobody is asked again) and the ledger, and
// the refund happens once.
func TestCrashAfterApprovalRefundsOnceAndAsksNobodyTwice(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	if _, err := f.rt.Decide(context.Background(), "acme", a.ID, ApprovalDecision{Verdict: "approve", By: "human:maya"}); err != nil {
		t.Fatal(err)
	}
	crashCtx, crash := context.WithCancel(context.Background())
	f.world.afterRefund = crash
	_ = f.rt.Drain(crashCtx)
	f.world.afterRefund = nil
	if refunds, notes := f.world.counts(); refunds != 1 || notes != 0 {
		t.Fatalf("after the crash: %d refunds, %d notes", refunds, notes)
	}
	f.clock.Advance(time.Minute) // the dead worker's lease is on this host: taken over at once
	run := f.drain(t, f.runtime(t, "default"))
	if run.Status != store.StatusDone {
		t.Fatalf("run %s (%s)", run.Status, run.StopDetail)
	}
	if refunds, notes := f.world.counts(); refunds != 1 || notes != 1 {
		t.Errorf("%d refunds, %d notes; want 1 and 1", refunds, notes)
	}
	all, _ := f.st.Approvals(context.Background(), store.ListApprovalsParams{RunID: f.run.ID})
	if len(all) != 1 {
		t.Errorf("%d approvals, want the one: nobody is asked twice", len(all))
	}
}

func TestNoApproverMeansDeny(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	w := &approvalWorld{}
	agent := &Agent{Name: "a", Model: turnWithRefund(), Tools: w.tools()} // DefaultPolicy
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "refund"})
	if run.Status != store.StatusDone {
		t.Fatalf("run %s", run.Status)
	}
	if refunds, notes := w.counts(); refunds != 0 || notes != 1 {
		t.Errorf("%d refunds, %d notes; want the refund denied and the note run", refunds, notes)
	}
	res := loadMessages(t, st, run.ID)[2].Content[1]
	if !res.IsError || !strings.Contains(res.Content, "no approver is configured") || !strings.Contains(res.Content, "Nothing was executed") {
		t.Errorf("result %+v", res)
	}
}

// A policy can gate on totals: however the model is talked into it, refunds
// in one run above 300 need a person, even when each is small.
func TestPolicyGatesOnRunTotals(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	w := &approvalWorld{}
	total := refundsOver300
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		n := len(req.Messages) / 2
		if n < 4 {
			return scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundArgs{ChargeID: "CH-" + string(rune('1'+n)), Amount: 100}}}}, nil
		}
		return scripted.Reply{Text: "done"}, nil
	})
	agent := &Agent{Name: "a", Model: m, Tools: w.tools(), Policy: total, PolicyVersion: "totals-v1"}
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "refund everything"})
	if refunds, _ := w.counts(); refunds != 3 || run.Status != store.StatusWaitingApproval {
		t.Fatalf("%d refunds, run %s; want 3 allowed and the 4th waiting", refunds, run.Status)
	}
	pending, _ := st.Approvals(context.Background(), store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
	if len(pending) != 1 || pending[0].Category != "refund_total" {
		t.Errorf("pending %+v", pending)
	}
}

// refundsOver300 sends to a person the refund that would take the run's
// refunds, with the turn's earlier ones, over 300.
func refundsOver300(ctx context.Context, c PolicyCall) (Decision, error) {
	if c.Tool != "refund" {
		return Decision{Verdict: Allow}, nil
	}
	sum := new(big.Rat)
	for _, p := range append(c.Prior, PriorEffect{Tool: c.Tool, Args: c.Args}) {
		var a struct {
			Amount json.Number `json:"amount"`
		}
		if p.Tool == "refund" && json.Unmarshal(p.Args, &a) == nil {
			if r, ok := new(big.Rat).SetString(a.Amount.String()); ok {
				sum.Add(sum, r)
			}
		}
	}
	if sum.Cmp(big.NewRat(300, 1)) > 0 {
		return Decision{Verdict: NeedsApproval, Reason: "refunds in this run would exceed 300", Category: "refund_total"}, nil
	}
	return Decision{Verdict: Allow}, nil
}

// The total holds within a turn too: four refunds of 100 asked for at once
// are judged one after another, the fourth needs a person, and so none of
// the turn runs until the person decides.
func TestPolicyGatesOnTotalsWithinATurn(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	w := &approvalWorld{}
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) == 1 {
			var calls []scripted.Call
			for i := range 4 {
				calls = append(calls, scripted.Call{Name: "refund", Args: refundArgs{ChargeID: "CH-" + string(rune('1'+i)), Amount: 100}})
			}
			return scripted.Reply{Calls: calls}, nil
		}
		return scripted.Reply{Text: "done"}, nil
	})
	agent := &Agent{Name: "a", Model: m, Tools: w.tools(), Policy: refundsOver300, PolicyVersion: "totals-v1"}
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "refund everything"})
	pending, _ := st.Approvals(context.Background(), store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
	if refunds, _ := w.counts(); refunds != 0 || run.Status != store.StatusWaitingApproval || len(pending) != 1 ||
		!strings.Contains(string(pending[0].Args), "CH-4") {
		t.Fatalf("%d refunds, run %s, pending %v; want none run and the fourth waiting for a person", refunds, run.Status, pending)
	}
	if _, err := rt.Decide(context.Background(), "default", pending[0].ID, ApprovalDecision{Verdict: "approve", By: "human:maya"}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if refunds, _ := w.counts(); refunds != 4 {
		t.Errorf("%d refunds after the approval, want the turn's 4", refunds)
	}
}
