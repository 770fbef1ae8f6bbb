package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	op := rt.Operator()
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
			fmt.Fprintf(stdout, "  │ context  %s\n", oneLine(run.Input, 90))
			fmt.Fprintf(stdout, "  │ args     %s\n", compact(rt.RedactRunArgs(run, a.Tool, a.Args)))
			fmt.Fprintf(stdout, "  │ expires  %s\n", a.ExpiresAt.Local().Format("15:04:05"))
			fmt.Fprintln(stdout, "  └──────────────────────────────────────────────────────────────")
		}
		if !interactive {
			if !quiet {
				why := "--yes"
				if !yes {
					why = "no terminal to ask at"
				}
				fmt.Fprintf(stdout, "  approved as policy:demo-auto (%s)\n", why)
			}
			decided, err := op.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Choice: belay.Approve, By: "policy:demo-auto"})
			if err != nil {
				return nil, err
			}
			by = append(by, decided.DecidedBy)
			continue
		}
		for {
			d, err := askDecision(in, stdout)
			if err != nil {
				return nil, err
			}
			decided, err := op.Decide(ctx, a.Tenant, a.ID, d)
			if errors.Is(err, belay.ErrInvalidEdit) {
				// The operator knows the tool: an edit that does not fit
				// its schema is refused before anything is recorded.
				fmt.Fprintf(stdout, "  %s; try again\n", strings.TrimPrefix(err.Error(), "decide: "))
				continue
			}
			if err != nil {
				return nil, err
			}
			by = append(by, decided.DecidedBy)
			break
		}
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
			return belay.ApprovalDecision{Choice: belay.Approve, By: by}, nil
		case "n", "no":
			fmt.Fprint(out, "  reason for the customer: ")
			note, _ := in.ReadString('\n')
			return belay.ApprovalDecision{Choice: belay.Reject, By: by, Note: strings.TrimSpace(note)}, nil
		case "e", "edit":
			fmt.Fprint(out, `  the arguments to change, as JSON (e.g. {"amount_usd": 100}; the others stay as they are): `)
			args, _ := in.ReadString('\n')
			if !json.Valid([]byte(strings.TrimSpace(args))) {
				fmt.Fprintln(out, "  that is not JSON; try again")
				continue
			}
			return belay.ApprovalDecision{Choice: belay.Edit, By: by, EditedArgs: json.RawMessage(strings.TrimSpace(args))}, nil
		default:
			fmt.Fprintln(out, "  answer y, n or e")
		}
	}
}
