package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

const tenantLimitUsage = `usage: belay tenant-limit [--tenant T [--max-running N] [--max-usd-per-day X | --max-usd-per-month X]] [--db PATH] [--json]

Caps tenant T across every worker of the store. --max-running caps how many
of T's runs are in a step at once: claims take none of T's queued runs while
it has N running. --max-usd-per-day and --max-usd-per-month cap what T's
runs spend together on models in a UTC day or month: a run whose next call
would pass the cap waits (paused, tenant_spend_cap) until the window rolls
over or the cap is raised, or escalates if its agent says so. 0 removes a
cap. Without --tenant, lists the caps.`

// tenantLimitJSON is one tenant's caps as tenant-limit --json prints them.
type tenantLimitJSON struct {
	Tenant     string  `json:"tenant"`
	MaxRunning int     `json:"max_running"`
	MaxUSD     float64 `json:"max_usd,omitempty"`
	Period     string  `json:"period,omitempty"`
}

// runTenantLimit sets or lists the caps on tenants' running runs and spend.
func runTenantLimit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tenant-limit", tenantLimitUsage, stdout)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose runs are capped")
	maxRunning := fs.Int("max-running", -1, "the most runs of the tenant in a step at once; 0 removes the cap")
	perDay := fs.Float64("max-usd-per-day", -1, "the most the tenant's runs spend on models in a UTC day, in USD; 0 removes the cap")
	perMonth := fs.Float64("max-usd-per-month", -1, "the most the tenant's runs spend on models in a UTC month, in USD; 0 removes the cap")
	asJSON := jsonFlag(fs, "the caps, one object a tenant")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	setting := *maxRunning >= 0 || *perDay >= 0 || *perMonth >= 0
	if (*tenant == "") == setting {
		return usageError{"tenant-limit: give --tenant with --max-running, --max-usd-per-day or --max-usd-per-month, or none of them to list the caps (" + fs.usageLine() + ")"}
	}
	if *perDay >= 0 && *perMonth >= 0 {
		return usageError{"tenant-limit: a tenant has one spend cap: give --max-usd-per-day or --max-usd-per-month, not both"}
	}
	open := db.openReadOnly
	if *tenant != "" {
		open = db.openExisting
	}
	st, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	tl, ok := st.(store.TenantLimiter)
	sc, spends := st.(store.SpendCapper)
	if !ok || !spends {
		return fmt.Errorf("tenant-limit: this store keeps no tenant caps")
	}
	if *maxRunning >= 0 {
		if err := tl.SetTenantLimit(ctx, store.TenantLimit{Tenant: *tenant, MaxRunning: *maxRunning}); err != nil {
			return err
		}
	}
	if *perDay >= 0 || *perMonth >= 0 {
		c := store.SpendCap{Tenant: *tenant, Period: store.SpendDaily, MaxNanoUSD: int64(model.USD(*perDay))}
		if *perMonth >= 0 {
			c.Period, c.MaxNanoUSD = store.SpendMonthly, int64(model.USD(*perMonth))
		}
		if err := sc.SetSpendCap(ctx, store.SetSpendCapParams{Cap: c, Now: time.Now()}); err != nil {
			return err
		}
	}
	limits, err := tl.TenantLimits(ctx)
	if err != nil {
		return err
	}
	caps, err := sc.SpendCaps(ctx)
	if err != nil {
		return err
	}
	byTenant := map[string]*tenantLimitJSON{}
	var tenants []string
	row := func(t string) *tenantLimitJSON {
		if r, ok := byTenant[t]; ok {
			return r
		}
		byTenant[t] = &tenantLimitJSON{Tenant: t}
		tenants = append(tenants, t)
		return byTenant[t]
	}
	for _, l := range limits {
		row(l.Tenant).MaxRunning = l.MaxRunning
	}
	for _, c := range caps {
		r := row(c.Tenant)
		r.MaxUSD, r.Period = model.Nanodollars(c.MaxNanoUSD).Dollars(), string(c.Period)
	}
	slices.Sort(tenants)
	if *asJSON {
		out := make([]tenantLimitJSON, len(tenants))
		for i, t := range tenants {
			out[i] = *byTenant[t]
		}
		return writeJSONLines(stdout, out)
	}
	if len(tenants) == 0 {
		fmt.Fprintln(stdout, "no tenant has a cap")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tMAX RUNNING\tSPEND CAP")
	for _, t := range tenants {
		r := byTenant[t]
		running, spend := "-", "-"
		if r.MaxRunning > 0 {
			running = fmt.Sprint(r.MaxRunning)
		}
		if r.Period != "" {
			spend = fmt.Sprintf("$%g a %s", r.MaxUSD, r.Period)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t, running, spend)
	}
	return tw.Flush()
}
