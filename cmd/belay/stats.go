package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay"
)

const statsUsage = `usage: belay stats approvals [--tenant T] [--json] [--db PATH]

Approval statistics per category: how many wait, and of people's decisions
the approval, edit and rejection rates and the median wait; decisions a policy
took (automatic approvals, expiries) are counted apart, by policy.`

// runStats prints approval statistics per category.
func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	_, rest, err := splitVerb("stats", statsUsage, []string{"approvals"}, args, stdout)
	if err != nil {
		return err
	}
	fs := newFlags("stats approvals", statsUsage, stdout)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "only this tenant's approvals")
	asJSON := jsonFlag(fs, "one object per category")
	if err := fs.parseNone(rest); err != nil {
		return err
	}
	st, err := db.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	stats, err := belay.NewOperator(st).ApprovalStats(ctx, *tenant)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSONLines(stdout, stats)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CATEGORY\tPENDING\tBY PEOPLE\tAPPROVED\tEDITED\tREJECTED\tMEDIAN WAIT\tBY POLICY\tSUGGESTS")
	for _, c := range stats {
		p := c.People
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f%%\t%.0f%%\t%.0f%%\t%s\t%s\t%s\n", c.Category, c.Pending, p.Decided,
			100*p.ApprovalRate, 100*p.EditRate, 100*p.RejectionRate, p.MedianDecision.Round(time.Second), byPolicy(c.Policy), c.Suggestion)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(stats) > 0 {
		fmt.Fprintln(stdout, "\nRates and waits are of people's decisions; BY POLICY counts those a policy took (policy:*), such as automatic approvals and expiries.")
	}
	return nil
}

// byPolicy says how many decisions policies took, and which: "3
// (policy:demo-auto 2, policy:expiry 1)".
func byPolicy(s belay.DeciderStats) string {
	if s.Decided == 0 {
		return "-"
	}
	names := slices.Sorted(maps.Keys(s.By))
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %d", name, s.By[name])
	}
	return fmt.Sprintf("%d (%s)", s.Decided, strings.Join(parts, ", "))
}
