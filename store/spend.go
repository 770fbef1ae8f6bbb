package store

import (
	"context"
	"fmt"
	"time"
)

// SpendCapper is a store that keeps tenants' spend caps and what each
// tenant spent in the current window of its cap, for every worker: the
// runs of a tenant across the fleet stop calling the model once together
// they would spend more. Both of Belay's stores implement it.
type SpendCapper interface {
	// SetSpendCap sets a tenant's cap (MaxNanoUSD 0 removes it), and
	// wakes the tenant's runs paused on it (stop reason
	// StopTenantSpendCap): each looks again whether its next call fits.
	SetSpendCap(ctx context.Context, p SetSpendCapParams) error
	// SpendCaps returns every tenant's cap, by tenant.
	SpendCaps(ctx context.Context) ([]SpendCap, error)
	// TenantSpend returns what a tenant spent in the window starting at
	// window, in nanodollars.
	TenantSpend(ctx context.Context, tenant string, window time.Time) (int64, error)
	// AddTenantSpend adds to what a tenant spent in a window.
	AddTenantSpend(ctx context.Context, p AddTenantSpendParams) error
}

// StopTenantSpendCap is the stop reason of a run paused on its tenant's
// spend cap.
const StopTenantSpendCap = "tenant_spend_cap"

// SpendPeriod is the window a spend cap counts over, in UTC.
type SpendPeriod string

const (
	SpendDaily   SpendPeriod = "day"
	SpendMonthly SpendPeriod = "month"
)

// SpendCap is the most a tenant's runs may spend together on models in a
// window of Period.
type SpendCap struct {
	Tenant     string
	Period     SpendPeriod
	MaxNanoUSD int64
}

// SetSpendCapParams sets Cap at Now.
type SetSpendCapParams struct {
	Cap SpendCap
	Now time.Time
}

// AddTenantSpendParams adds NanoUSD to what Tenant spent in the window
// starting at Window.
type AddTenantSpendParams struct {
	Tenant  string
	Window  time.Time
	NanoUSD int64
}

// Check says what is wrong with c, or nil.
func (c SpendCap) Check() error {
	if c.Tenant == "" || c.MaxNanoUSD < 0 || (c.MaxNanoUSD > 0 && c.Period != SpendDaily && c.Period != SpendMonthly) {
		return fmt.Errorf("spend cap %+v: want a tenant, a period (%q or %q) and a cap of 0 (none) or more", c, SpendDaily, SpendMonthly)
	}
	return nil
}

// Window returns the window of period p around now: its start and its end,
// in UTC.
func (p SpendPeriod) Window(now time.Time) (start, end time.Time) {
	now = now.UTC()
	if p == SpendMonthly {
		start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	start = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1)
}
