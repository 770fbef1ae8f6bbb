package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay"
)

const auditUsage = `usage: belay audit [--since AGE] [--tenant T] [--db PATH | --database-url URL]

Lists the irreversible side effects that ran because a policy approved them (a decider named
policy:<name>, such as an automatic approval) rather than a person, with their runs: the runs
an evaluation that accepts only people's approvals of irreversible actions fails. People's
decisions split from policies' per category: belay stats approvals.`

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", auditUsage, stdout)
	db := dbFlag(fs)
	sinceFlag := fs.String("since", "", "only runs created this recently: 7d, 12h, 90m (default: all)")
	tenant := fs.String("tenant", "", "only this tenant's runs (default: every tenant's)")
	asJSON := jsonFlag(fs, "one object per effect")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	var since time.Time
	if *sinceFlag != "" {
		age, err := parseAge(*sinceFlag)
		if err != nil {
			return usageError{"audit: --since: " + err.Error()}
		}
		since = time.Now().Add(-age)
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	found, err := belay.NewOperator(st).PolicyApprovals(ctx, *tenant, since)
	if err != nil {
		return err
	}
	if *asJSON {
		rows := make([]auditJSON, len(found))
		for i, f := range found {
			rows[i] = auditJSON{RunID: f.RunID, Tenant: f.Tenant, Agent: f.Agent, RunStatus: string(f.RunStatus),
				ApprovalID: f.ApprovalID, Tool: f.Tool, Category: f.Category, DecidedBy: f.DecidedBy,
				DecidedAt: f.DecidedAt.UTC(), Key: f.Key, State: string(f.State)}
		}
		return writeJSONLines(stdout, rows)
	}
	if len(found) == 0 {
		_, err := fmt.Fprintln(stdout, "no irreversible side effect ran on a policy's approval: people approved every one")
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tTOOL\tCATEGORY\tAPPROVED BY\tEFFECT")
	for _, f := range found {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.RunID, f.RunStatus, f.Tool, f.Category, f.DecidedBy, f.State)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\n%d irreversible side effects ran on a policy's approval, not a person's\n", len(found))
	return err
}

// auditJSON is a line of belay audit --json.
type auditJSON struct {
	RunID      string    `json:"run_id"`
	Tenant     string    `json:"tenant"`
	Agent      string    `json:"agent"`
	RunStatus  string    `json:"run_status"`
	ApprovalID string    `json:"approval_id"`
	Tool       string    `json:"tool"`
	Category   string    `json:"category"`
	DecidedBy  string    `json:"decided_by"`
	DecidedAt  time.Time `json:"decided_at"`
	Key        string    `json:"key"`
	State      string    `json:"state"`
}
