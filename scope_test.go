package belay_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// refundDesk is an agent whose model asks for the refund of CH-2, the
// duplicate charge of the seeded world, and then answers; it keeps what
// each run's refund call answered.
type refundDesk struct {
	mu      sync.Mutex
	answers []string
}

func (d *refundDesk) agent(w *support.World, scope belay.EffectScope) *belay.Agent {
	var refund belay.Tool
	for _, t := range support.Tools(w) {
		if t.Name == "issue_refund" {
			refund = t
		}
	}
	refund.Scope = scope
	refund.KeyFields = []string{"charge_id"}
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleUser && len(req.Messages) == 1 {
			return scripted.Reply{Calls: []scripted.Call{{Name: "issue_refund", Args: map[string]any{
				"invoice_id": "INV-2026-004512", "charge_id": "CH-2", "amount_usd": 288.00,
				"reason": "charged twice: " + last.Content[0].Text}}}}, nil
		}
		for _, b := range last.Content {
			if b.Type == model.TypeToolResult {
				d.mu.Lock()
				d.answers = append(d.answers, b.Content)
				d.mu.Unlock()
			}
		}
		return scripted.Reply{Text: "done"}, nil
	})
	return &belay.Agent{Name: "desk", Model: m, Tools: []belay.Tool{refund}, Prices: scripted.Prices,
		Policy: func(context.Context, belay.PolicyCall) (belay.Decision, error) {
			return belay.Decision{Verdict: belay.Allow}, nil
		}, PolicyVersion: "allow-all"}
}

// twoTickets runs two runs, two customers' tickets about the same double
// charge, one after the other, and returns them with the refund requests
// the payment processor received for the charge.
func twoTickets(t *testing.T, scope belay.EffectScope) (first store.Run, requests int, d *refundDesk) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	w, err := support.OpenWorld(ctx, filepath.Join(dir, "world.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := w.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d = &refundDesk{}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{d.agent(w, scope)}})
	if err != nil {
		t.Fatal(err)
	}
	var runs []store.Run
	for _, user := range []string{"ada", "ada's partner"} {
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "desk", User: user, Input: user})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if run, err = st.GetRun(ctx, "", run.ID); err != nil {
			t.Fatal(err)
		}
		if run.Status != store.StatusDone {
			t.Fatalf("run of %s ended %s (%s: %s)", user, run.Status, run.StopReason, run.StopDetail)
		}
		runs = append(runs, run)
	}
	requests, err = w.RefundRequests(ctx, "CH-2")
	if err != nil {
		t.Fatal(err)
	}
	return runs[0], requests, d
}

// Two runs about the same charge, with the refund scoped to the tenant and
// keyed by the charge: the payment processor gets one request, and the
// second run's model is told the first run did it.
func TestTwoRunsAboutOneChargeRefundItOnce(t *testing.T) {
	t.Parallel()
	first, requests, d := twoTickets(t, belay.ScopeTenant)
	if requests != 1 {
		t.Errorf("the payment processor got %d refund requests for CH-2, want 1", requests)
	}
	var told string
	for _, a := range d.answers {
		if strings.Contains(a, "already_done_by_run") {
			told = a
		}
	}
	if !strings.Contains(told, first.ID) || !strings.Contains(told, "RF-") {
		t.Errorf("the second run's model was not told that run %s refunded the charge, with its refund; its answers: %v",
			first.ID, d.answers)
	}
	if len(d.answers) != 2 {
		t.Errorf("%d refund answers, want one per run", len(d.answers))
	}
}

// The same two runs with the default scope: each run's key holds its id,
// and the processor gets a request from each (it refunds the charge once,
// by its own rule). This is what the scope saves.
func TestTwoRunsWithRunScopedRefundsEachCall(t *testing.T) {
	t.Parallel()
	_, requests, _ := twoTickets(t, belay.ScopeRun)
	if requests != 2 {
		t.Errorf("the payment processor got %d refund requests for CH-2, want 2 (one per run)", requests)
	}
}

// A tool scoped to the tenant without key fields would key every call of
// it alike: the runtime refuses it and says what to declare.
func TestTenantScopeNeedsKeyFields(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tool := belay.NewTool("refund", "refund a charge", belay.Irreversible,
		func(context.Context, struct{ ChargeID string }) (string, error) { return "ok", nil })
	tool.Scope = belay.ScopeTenant
	_, err = belay.New(belay.Config{Store: st, Agents: []*belay.Agent{{Name: "a", Model: scripted.New(), Tools: []belay.Tool{tool}}}})
	if err == nil || !strings.Contains(err.Error(), "KeyFields") {
		t.Errorf("New with a tenant-scoped tool without KeyFields: %v, want an error naming KeyFields", err)
	}
}

// While another run's call under the key has no recorded outcome (it may be
// in flight), a second run asking for the same refund pauses until it can
// look again: it never calls.
func TestRunWaitsForAnotherRunsCallUnderTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w, err := support.OpenWorld(ctx, filepath.Join(dir, "world.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &refundDesk{}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{d.agent(w, belay.ScopeTenant)}})
	if err != nil {
		t.Fatal(err)
	}
	// The first run's worker has recorded its intent; its call is out.
	first, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "desk", User: "ada", Input: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	held, err := st.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "other-worker", Now: now, TTL: time.Hour, Limit: 1})
	if err != nil || len(held) != 1 {
		t.Fatalf("claim the first run: %v, %v", held, err)
	}
	keyArgs, err := ledger.Canonical([]byte(`{"charge_id":"CH-2"}`), []string{"charge_id"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.BeginEffect(ctx, store.BeginEffectParams{
		Fence: store.Fence{RunID: first.ID, Owner: "other-worker", Epoch: held[0].LeaseEpoch}, Now: now,
		Effect: store.Effect{Tenant: belay.DefaultTenant, Key: ledger.TenantKey("issue_refund", keyArgs), RunID: first.ID,
			Tool: "issue_refund", ArgsHash: ledger.Hash(keyArgs), InFlightUntil: now.Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}

	second, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "desk", User: "ada's partner", Input: "partner"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	second, err = st.GetRun(ctx, "", second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != store.StatusPaused || second.StopReason != "effect_of_another_run" || !second.ResumeAfter.After(now) {
		t.Errorf("second run: %s (%s) until %s; want paused, effect_of_another_run, until later", second.Status,
			second.StopReason, second.ResumeAfter)
	}
	if n, err := w.RefundRequests(ctx, "CH-2"); err != nil || n != 0 {
		t.Errorf("refund requests for CH-2: %d (%v), want 0: the first run's call is the only one", n, err)
	}
}
