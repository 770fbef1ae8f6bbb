package belay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// SpendCapAction is what a run does when its next model call would take
// its tenant past the tenant's spend cap.
type SpendCapAction string

const (
	// SpendCapWait pauses the run (stop reason tenant_spend_cap), holding
	// no lease, until the cap's window rolls over or the cap is raised.
	// The default.
	SpendCapWait SpendCapAction = ""
	// SpendCapEscalate hands the run to a person, with the agent's
	// message for the customer: for agents someone is waiting on.
	SpendCapEscalate SpendCapAction = "escalate"
)

func (a SpendCapAction) check() error {
	if a != SpendCapWait && a != SpendCapEscalate {
		return fmt.Errorf("OnSpendCap %q: want %q (wait, the default) or %q", string(a), "", SpendCapEscalate)
	}
	return nil
}

// SetSpendCap caps what the runs of tenant spend together on models in a
// UTC day (store.SpendDaily) or month (store.SpendMonthly), across every
// worker of the store; maxUSD 0 removes the cap. Before each model call a
// run checks the cap with the same projection as its own budget (what the
// tenant spent in the window plus what the call would cost at most). The
// tenant's runs paused on the cap look again at once. Spend is counted
// from when the tenant first has a cap: calls made before are not in it.
func (r *Runtime) SetSpendCap(ctx context.Context, tenant string, period store.SpendPeriod, maxUSD float64) error {
	sc, ok := r.store.(store.SpendCapper)
	if !ok {
		return fmt.Errorf("set spend cap: the store %T keeps no spend caps (store.SpendCapper): use Belay's SQLite or PostgreSQL store", r.store)
	}
	if maxUSD < 0 {
		return fmt.Errorf("set spend cap of %s: %v USD: want 0 (no cap) or more", tenant, maxUSD)
	}
	c := store.SpendCap{Tenant: tenant, Period: period, MaxNanoUSD: int64(model.USD(maxUSD))}
	if err := sc.SetSpendCap(ctx, store.SetSpendCapParams{Cap: c, Now: r.cfg.now()}); err != nil {
		return err
	}
	r.spendCaps.forget()
	return nil
}

// spendCapRefresh is how old the caps a runtime last read may be: a cap
// set through another process is heeded within it.
const spendCapRefresh = time.Second

// spendCaps are the tenants' caps as the runtime last read them.
type spendCaps struct {
	mu   sync.Mutex
	read time.Time
	caps map[string]store.SpendCap
}

func (s *spendCaps) get(ctx context.Context, sc store.SpendCapper, tenant string, now time.Time) (store.SpendCap, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caps == nil || now.Sub(s.read) >= spendCapRefresh || now.Before(s.read) {
		all, err := sc.SpendCaps(ctx)
		if err != nil {
			return store.SpendCap{}, false, err
		}
		s.caps = make(map[string]store.SpendCap, len(all))
		for _, c := range all {
			s.caps[c.Tenant] = c
		}
		s.read = now
	}
	c, ok := s.caps[tenant]
	return c, ok, nil
}

func (s *spendCaps) forget() {
	s.mu.Lock()
	s.caps = nil
	s.mu.Unlock()
}

// checkSpendCap decides whether the next model call, req, fits the run's
// tenant's spend cap. If it does not, it stops the run as the agent says
// (waits or escalates) and returns what the stop returns; nil means go
// ahead. A store that does not answer lets the call go ahead: the run's
// own budget still holds.
func (x *execution) checkSpendCap(ctx context.Context, m model.Model, req model.Request) error {
	sc, ok := x.r.store.(store.SpendCapper)
	if !ok {
		return nil
	}
	now := x.r.cfg.now()
	c, capped, err := x.r.spendCaps.get(ctx, sc, x.run.Tenant, now)
	if err != nil || !capped {
		if err != nil {
			x.log().Warn("read the tenants' spend caps", "err", err)
		}
		return nil
	}
	start, end := c.Period.Window(now)
	spent, err := sc.TenantSpend(ctx, x.run.Tenant, start)
	if err != nil {
		x.log().Warn("read the tenant's spend", "tenant", x.run.Tenant, "err", err)
		return nil
	}
	price, _ := x.agent.Prices.Lookup(m.Name())
	next := price.Cost(model.Usage{InputTokens: estimateInputTokens(ctx, m, req), OutputTokens: int64(req.MaxTokens)})
	if model.Nanodollars(spent)+next <= model.Nanodollars(c.MaxNanoUSD) {
		return nil
	}
	detail := fmt.Sprintf("tenant %s spent $%.6f of its %s cap of $%.6f; the next call would cost up to $%.6f",
		x.run.Tenant, model.Nanodollars(spent).Dollars(), periodName(c.Period), model.Nanodollars(c.MaxNanoUSD).Dollars(), next.Dollars())
	if x.agent.OnSpendCap == SpendCapEscalate {
		return x.escalate(ctx, store.StatusEscalated, store.StopTenantSpendCap, detail+"; the agent hands such runs to a person", nil, nil)
	}
	x.run.ResumeAfter = end
	return x.stop(ctx, store.StatusPaused, store.StopTenantSpendCap, fmt.Sprintf(
		"%s; the run waits, holding no worker, until the window rolls over at %s or the cap is raised (belay spend-cap --tenant %s --max-usd-per-%s N)",
		detail, end.Format(time.RFC3339), x.run.Tenant, c.Period))
}

// recordSpend adds a model call's cost to its tenant's spend, when the
// tenant has a cap.
func (x *execution) recordSpend(ctx context.Context, cost model.Nanodollars) {
	sc, ok := x.r.store.(store.SpendCapper)
	if !ok || cost <= 0 {
		return
	}
	now := x.r.cfg.now()
	c, capped, err := x.r.spendCaps.get(ctx, sc, x.run.Tenant, now)
	if err != nil || !capped {
		return
	}
	start, _ := c.Period.Window(now)
	if err := sc.AddTenantSpend(ctx, store.AddTenantSpendParams{Tenant: x.run.Tenant, Window: start, NanoUSD: int64(cost)}); err != nil {
		x.log().Warn("add to the tenant's spend", "tenant", x.run.Tenant, "err", err)
	}
}

func periodName(p store.SpendPeriod) string {
	if p == store.SpendMonthly {
		return "monthly"
	}
	return "daily"
}
