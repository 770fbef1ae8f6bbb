package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// decideDemoApprovals shows each pending approval of the run as a card and
// takes the decision of the person at the terminal: y, n or edit. With
// --yes, or when nobody is at a terminal, it approves as policy:demo-auto.
// It returns who decided each one.
func decideDemoApprovals(ctx context.Context, rt *belay.Runtime, st store.Store, runID string, yes bool, stdout io.Writer, quiet bool) ([]string, error) {
	pending, err := st.Approvals(ctx, store.ListApprovalsParams{RunID: runID, Status: store.ApprovalPending})
	if err != nil {
		return nil, err
	}
	interactive := !yes && !quiet && isTTY(os.Stdin)
	in := bufio.NewReader(os.Stdin)
	var by []string
	for _, a := range pending {
		run, err := st.GetRun(ctx, a.Tenant, a.RunID)
		if err != nil {
			return nil, err
		}
		if !quiet {
			fmt.Fprintln(stdout)
			fmt.Fprintln(stdout, "  ┌ approval needed ─────────────────────────────────────────────")
			fmt.Fprintf(stdout, "  │ what     %s\n", a.Summary)
			fmt.Fprintf(stdout, "  │ why      %s (policy %s)\n", a.Reason, a.PolicyVersion)
			fmt.Fprintf(stdout, "  │ context  %s\n", oneLine(demoInput, 90))
			fmt.Fprintf(stdout, "  │ args     %s\n", compact(rt.RedactRunArgs(run, a.Tool, a.Args)))
			fmt.Fprintf(stdout, "  │ expires  %s\n", a.ExpiresAt.Local().Format("15:04:05"))
			fmt.Fprintln(stdout, "  └──────────────────────────────────────────────────────────────")
		}
		d := belay.ApprovalDecision{Verdict: "approve", By: "policy:demo-auto"}
		if interactive {
			d, err = askDecision(in, stdout)
			if err != nil {
				return nil, err
			}
		} else if !quiet {
			why := "--yes"
			if !yes {
				why = "no terminal to ask at"
			}
			fmt.Fprintf(stdout, "  approved as policy:demo-auto (%s)\n", why)
		}
		decided, err := rt.Operator().Decide(ctx, a.Tenant, a.ID, d)
		if err != nil {
			return nil, err
		}
		by = append(by, decided.DecidedBy)
	}
	return by, nil
}

// askDecision reads y, n or edit from the person at the terminal.
func askDecision(in *bufio.Reader, out io.Writer) (belay.ApprovalDecision, error) {
	by := decider("")
	for {
		fmt.Fprint(out, "  approve? [y]es / [n]o / [e]dit: ")
		line, err := in.ReadString('\n')
		if err != nil {
			return belay.ApprovalDecision{}, fmt.Errorf("read decision: %w", err)
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes", "":
			return belay.ApprovalDecision{Verdict: "approve", By: by}, nil
		case "n", "no":
			fmt.Fprint(out, "  reason for the customer: ")
			note, _ := in.ReadString('\n')
			return belay.ApprovalDecision{Verdict: "reject", By: by, Note: strings.TrimSpace(note)}, nil
		case "e", "edit":
			fmt.Fprint(out, `  new arguments as JSON (e.g. {"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":100,"reason":"partial"}): `)
			args, _ := in.ReadString('\n')
			if !json.Valid([]byte(strings.TrimSpace(args))) {
				fmt.Fprintln(out, "  that is not JSON; try again")
				continue
			}
			return belay.ApprovalDecision{Verdict: "edit", By: by, EditedArgs: json.RawMessage(strings.TrimSpace(args))}, nil
		default:
			fmt.Fprintln(out, "  answer y, n or e")
		}
	}
}
