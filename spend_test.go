package belay

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// dollarModel answers every call with 1,000 output tokens: $1 at its
// price, what a call of 1,000 MaxOutputTokens projects.
type dollarModel struct{ calls atomic.Int64 }

func (m *dollarModel) Name() string { return "dollar" }

func (m *dollarModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.calls.Add(1)
	return model.Response{Content: []model.Block{model.TextBlock("done")}, StopReason: model.StopEndTurn,
		Usage: model.Usage{OutputTokens: 1000}}, nil
}

var dollarPrices = model.PriceTable{"dollar": {OutputPerMTok: 1000}}

// Two runs of one tenant together cross its daily cap: the first's call
// fits, the second's would not, so the second waits, paused with the
// reason and holding no lease, while another tenant's run goes on; it
// goes on when the day rolls over. The next day a run waiting on the cap
// goes on as soon as the cap is raised.
func TestTwoRunsOfATenantCrossItsSpendCap(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := newClock()
	m := &dollarModel{}
	agent := &Agent{Name: "a", Model: m, Prices: dollarPrices, MaxOutputTokens: 1000}
	rt := newRuntime(t, st, c, agent)
	ctx := context.Background()
	if err := rt.SetSpendCap(ctx, "acme", store.SpendDaily, 1.5); err != nil {
		t.Fatal(err)
	}
	first := startAndDrain(t, rt, RunRequest{Agent: "a", Tenant: "acme", User: "u", Input: "one"})
	second := startAndDrain(t, rt, RunRequest{Agent: "a", Tenant: "acme", User: "u", Input: "two"})
	other := startAndDrain(t, rt, RunRequest{Agent: "a", Tenant: "globex", User: "u", Input: "three"})
	if first.Status != store.StatusDone || other.Status != store.StatusDone {
		t.Fatalf("the first run of acme: %s, globex's: %s; want both done", first.Status, other.Status)
	}
	if second.Status != store.StatusPaused || second.StopReason != store.StopTenantSpendCap || second.LeaseOwner != "" {
		t.Fatalf("the second run of acme: %s (%s), lease %q; want paused for %s, holding no lease", second.Status,
			second.StopReason, second.LeaseOwner, store.StopTenantSpendCap)
	}
	if !strings.Contains(second.StopDetail, "spent $1.000000 of its daily cap of $1.500000") ||
		!strings.Contains(second.StopDetail, "belay spend-cap --tenant acme --max-usd-per-day") {
		t.Errorf("stop detail %q: want what was spent, the cap, and how to raise it", second.StopDetail)
	}
	midnight := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	if !second.ResumeAfter.Equal(midnight) {
		t.Errorf("the second run waits until %v, want the window's end %v", second.ResumeAfter, midnight)
	}
	if m.calls.Load() != 2 {
		t.Fatalf("%d model calls, want 2 (acme's first run and globex's)", m.calls.Load())
	}
	c.Advance(midnight.Sub(c.Now()))
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.GetRun(ctx, "", second.ID); r.Status != store.StatusDone {
		t.Fatalf("the second run after the day rolled over: %s (%s), want done", r.Status, r.StopReason)
	}
	// The new day has $1 spent: a third run waits, and goes on when the
	// cap is raised, the clock standing still.
	third := startAndDrain(t, rt, RunRequest{Agent: "a", Tenant: "acme", User: "u", Input: "four"})
	if third.StopReason != store.StopTenantSpendCap {
		t.Fatalf("the third run: %s (%s), want paused on the cap", third.Status, third.StopReason)
	}
	if err := rt.SetSpendCap(ctx, "acme", store.SpendDaily, 5); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.GetRun(ctx, "", third.ID); r.Status != store.StatusDone {
		t.Errorf("the third run after the cap was raised: %s (%s), want done", r.Status, r.StopReason)
	}
	if spent, _ := st.TenantSpend(ctx, "acme", midnight); spent != int64(model.USD(2)) {
		t.Errorf("acme spent %d nanodollars the second day, want $2", spent)
	}
}

// An agent that escalates on the cap hands its run to a person instead of
// waiting for the next day.
func TestSpendCapEscalatesForAnAgentThatSaysSo(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := newClock()
	m := &dollarModel{}
	rt := newRuntime(t, st, c, &Agent{Name: "chat", Model: m, Prices: dollarPrices, MaxOutputTokens: 1000,
		OnSpendCap: SpendCapEscalate})
	ctx := context.Background()
	if err := rt.SetSpendCap(ctx, "acme", store.SpendMonthly, 0.5); err != nil {
		t.Fatal(err)
	}
	run := startAndDrain(t, rt, RunRequest{Agent: "chat", Tenant: "acme", User: "u", Input: "hi"})
	if run.Status != store.StatusEscalated || run.StopReason != store.StopTenantSpendCap || len(run.Escalation) == 0 || m.calls.Load() != 0 {
		t.Fatalf("run: %s (%s), %d model calls; want escalated for the cap with a packet, no call", run.Status, run.StopReason, m.calls.Load())
	}
	if err := rt.SetSpendCap(ctx, "acme", "week", 1); err == nil || !strings.Contains(err.Error(), "period") {
		t.Errorf("a weekly cap: %v, want an error naming the periods", err)
	}
	if _, err := New(Config{Store: st, Agents: []*Agent{{Name: "x", Model: m, OnSpendCap: "retry"}}}); err == nil {
		t.Error("an unknown OnSpendCap was accepted")
	}
}
