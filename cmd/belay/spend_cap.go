package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

const spendCapUsage = `usage: belay spend-cap [--tenant T (--max-usd-per-day X | --max-usd-per-month X)] [--db PATH] [--json]

Caps what tenant T's runs spend together on models in a UTC day or month,
across every worker of the store: a run whose next call would pass the cap
waits (paused, tenant_spend_cap) until the window rolls over or the cap is
raised, or escalates if its agent says so (OnSpendCap, on_spend_cap in
belay.yaml). A tenant has one cap; 0 removes it. Without --tenant, lists the
caps.`

// spendCapJSON is one tenant's spend cap as spend-cap --json prints it.
type spendCapJSON struct {
	Tenant string  `json:"tenant"`
	MaxUSD float64 `json:"max_usd"`
	Period string  `json:"period"`
}

// runSpendCap sets or lists the tenants' spend caps.
func runSpendCap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("spend-cap", spendCapUsage, stdout)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose spend is capped")
	perDay := fs.Float64("max-usd-per-day", -1, "the most the tenant's runs spend on models in a UTC day, in USD; 0 removes the cap")
	perMonth := fs.Float64("max-usd-per-month", -1, "the most the tenant's runs spend on models in a UTC month, in USD; 0 removes the cap")
	asJSON := jsonFlag(fs, "the caps, one object a tenant")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	setting := *perDay >= 0 || *perMonth >= 0
	if (*tenant == "") == setting {
		return usageError{"spend-cap: give --tenant with --max-usd-per-day or --max-usd-per-month, or neither to list the caps (" + fs.usageLine() + ")"}
	}
	if *perDay >= 0 && *perMonth >= 0 {
		return usageError{"spend-cap: a tenant has one spend cap: give --max-usd-per-day or --max-usd-per-month, not both"}
	}
	open := db.openReadOnly
	if setting {
		open = db.openExisting
	}
	st, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	sc, ok := st.(store.SpendCapper)
	if !ok {
		return fmt.Errorf("spend-cap: this store keeps no spend caps")
	}
	if setting {
		c := store.SpendCap{Tenant: *tenant, Period: store.SpendDaily, MaxNanoUSD: int64(model.USD(*perDay))}
		if *perMonth >= 0 {
			c.Period, c.MaxNanoUSD = store.SpendMonthly, int64(model.USD(*perMonth))
		}
		if err := sc.SetSpendCap(ctx, store.SetSpendCapParams{Cap: c, Now: time.Now()}); err != nil {
			return err
		}
	}
	caps, err := sc.SpendCaps(ctx)
	if err != nil {
		return err
	}
	out := make([]spendCapJSON, len(caps))
	for i, c := range caps {
		out[i] = spendCapJSON{Tenant: c.Tenant, MaxUSD: model.Nanodollars(c.MaxNanoUSD).Dollars(), Period: string(c.Period)}
	}
	if *asJSON {
		return writeJSONLines(stdout, out)
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no tenant has a spend cap")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tSPEND CAP")
	for _, c := range out {
		fmt.Fprintf(tw, "%s\t$%g a %s\n", c.Tenant, c.MaxUSD, c.Period)
	}
	return tw.Flush()
}
