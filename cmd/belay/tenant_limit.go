package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/belayrun/belay/store"
)

const tenantLimitUsage = `usage: belay tenant-limit [--tenant T --max-running N] [--db PATH] [--json]

Caps how many runs of tenant T are in a step at once, across every worker of
the store: claims take none of T's queued runs while it has N running.
--max-running 0 removes the cap. Without --tenant, lists the caps.`

// tenantLimitJSON is one cap as tenant-limit --json prints it.
type tenantLimitJSON struct {
	Tenant     string `json:"tenant"`
	MaxRunning int    `json:"max_running"`
}

// runTenantLimit sets or lists the caps on tenants' running runs.
func runTenantLimit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tenant-limit", tenantLimitUsage, stdout)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose running runs are capped")
	maxRunning := fs.Int("max-running", -1, "the most runs of the tenant in a step at once; 0 removes the cap")
	asJSON := jsonFlag(fs, "the caps, one object a tenant")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if (*tenant == "") != (*maxRunning < 0) {
		return usageError{"tenant-limit: give --tenant and --max-running together, or neither to list the caps (" + fs.usageLine() + ")"}
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
	if !ok {
		return fmt.Errorf("tenant-limit: this store keeps no tenant caps")
	}
	if *tenant != "" {
		if err := tl.SetTenantLimit(ctx, store.TenantLimit{Tenant: *tenant, MaxRunning: *maxRunning}); err != nil {
			return err
		}
	}
	limits, err := tl.TenantLimits(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]tenantLimitJSON, len(limits))
		for i, l := range limits {
			out[i] = tenantLimitJSON{Tenant: l.Tenant, MaxRunning: l.MaxRunning}
		}
		return writeJSONLines(stdout, out)
	}
	if len(limits) == 0 {
		fmt.Fprintln(stdout, "no tenant has a cap")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tMAX RUNNING")
	for _, l := range limits {
		fmt.Fprintf(tw, "%s\t%d\n", l.Tenant, l.MaxRunning)
	}
	return tw.Flush()
}
