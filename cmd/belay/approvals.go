package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/config"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

const approvalsUsage = `usage: belay approvals [--status S] [--tenant T] [--json] [--db PATH]

Lists approvals, pending ones by default, with what a person needs to decide
them: what the call does, why the policy asks, the run and the arguments.
Decide them with belay approve ID or belay reject ID --note TEXT.`

// runApprovals lists approvals, pending ones by default, with what a person
// needs to decide them.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("approvals", approvalsUsage, stdout)
	db := dbFlag(fs)
	status := fs.String("status", "pending", "pending, approved, edited, rejected, expired, or all")
	tenant := fs.String("tenant", "", "only this tenant's approvals")
	asJSON := jsonFlag(fs, "one object per approval")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	p := store.ListApprovalsParams{Tenant: *tenant}
	switch *status {
	case "all":
	case "pending", "approved", "edited", "rejected", "expired":
		p.Status = store.ApprovalStatus(*status)
	default:
		return usageError{fmt.Sprintf("approvals: unknown status %q", *status)}
	}
	st, err := db.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	as, err := st.Approvals(ctx, p)
	if err != nil {
		return err
	}
	// The arguments are shown redacted by what each approval's run
	// recorded: this command has no agent code to tell the secrets by.
	runs := map[string]store.Run{}
	for i, a := range as {
		run, ok := runs[a.RunID]
		if !ok {
			if run, err = st.GetRun(ctx, a.Tenant, a.RunID); err != nil {
				return fmt.Errorf("approval %s: %w", a.ID, err)
			}
			runs[a.RunID] = run
		}
		as[i] = redactApproval(a, run)
	}
	if *asJSON {
		out := make([]approvalJSON, len(as))
		for i, a := range as {
			out[i] = newApprovalJSON(a)
		}
		return writeJSONLines(stdout, out)
	}
	if len(as) == 0 {
		fmt.Fprintf(stdout, "no %s approvals\n", *status)
		return nil
	}
	for _, a := range as {
		fmt.Fprintf(stdout, "%s  %s  %s\n", a.ID, a.Status, a.Category)
		fmt.Fprintf(stdout, "  what     %s\n", a.Summary)
		fmt.Fprintf(stdout, "  why      %s (policy %s)\n", a.Reason, a.PolicyVersion)
		fmt.Fprintf(stdout, "  run      %s (tenant %s), tool %s %s\n", a.RunID, a.Tenant, a.Tool, compact(a.Args))
		if pe := a.ParentEffect; pe != nil {
			fmt.Fprintf(stdout, "  parent   run %s did this after its step %d (%s); this run is its fork, and approving does it again\n", pe.RunID, pe.Step, pe.State)
		}
		if a.Status == store.ApprovalPending {
			fmt.Fprintf(stdout, "  expires  %s (in %s)\n", a.ExpiresAt.Local().Format(time.DateTime), time.Until(a.ExpiresAt).Round(time.Second))
			fmt.Fprintf(stdout, "  decide   belay approve %s | belay reject %s --note ... | belay approve %s --edit '{...}'\n", a.ID, a.ID, a.ID)
		} else {
			fmt.Fprintf(stdout, "  decided  by %s at %s %s\n", a.DecidedBy, a.DecidedAt.Local().Format(time.DateTime), a.Note)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// approve and reject live here, beside the listing whose ids they take:
// they are one command with two verbs (a decision on a pending approval),
// sharing its flags, its checks and its output, and a file each would hold
// a one-line call to decideCommand.

// runApprove approves a pending approval, or approves it with edited
// arguments.
func runApprove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return decideCommand(ctx, "approve", args, stdout, stderr)
}

// runReject rejects a pending approval with a reason the model reads.
func runReject(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return decideCommand(ctx, "reject", args, stdout, stderr)
}

const (
	approveUsage = `usage: belay approve ID [--edit JSON] [--as NAME] [--note TEXT] [--config FILE] [--db PATH]

Approves the pending approval ID (belay approvals lists them), or approves
it with some arguments changed: --edit names the fields to change, as a JSON
object merged into the call's arguments ('{"amount_usd": 100}' changes the
amount and keeps the rest; a field given as null is removed). The edited call
is checked against the tool's input schema first, which needs the agent's
tools: the support desk's, or the agents of --config FILE, as belay serve
runs them. The run continues on the next worker.`
	rejectUsage = `usage: belay reject ID --note TEXT [--as NAME] [--db PATH]

Rejects the pending approval ID (belay approvals lists them); the model reads
the note and explains it to the customer.`
)

func decideCommand(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	usage := approveUsage
	if verb == "reject" {
		usage = rejectUsage
	}
	fs := newFlags(verb, usage, stdout)
	db := dbFlag(fs)
	as := fs.String("as", "", "who decides, recorded with the decision (default: human:$USER)")
	note := fs.String("note", "", "why; on a rejection, the model reads it")
	asJSON := jsonFlag(fs, "the decided approval")
	edit, configPath := "", ""
	if verb == "approve" {
		fs.StringVar(&edit, "edit", "", `approve with these arguments changed: a JSON object of the fields to change, merged into the call's ('{"amount_usd": 100}'; null removes a field)`)
		fs.StringVar(&configPath, "config", "", "with --edit, the agents file belay serve runs, whose tools check the edit (default: the support desk)")
	}
	id, err := fs.parseOne(args, "approval", "list pending approvals with: belay approvals")
	if err != nil {
		return err
	}
	d := belay.ApprovalDecision{Choice: belay.ApprovalChoice(verb), By: decider(*as), Note: *note}
	if edit != "" {
		if !json.Valid([]byte(edit)) || !strings.HasPrefix(strings.TrimSpace(edit), "{") {
			return usageError{`approve: --edit takes the fields to change as a JSON object, like '{"amount_usd": 100}'`}
		}
		// The console and the traces show a sensitive value as this marker;
		// copied into an edit, it would reach the tool as the value. (The
		// console's own edit puts the hidden value back.)
		if strings.Contains(edit, `"`+belay.Redacted+`"`) {
			return usageError{fmt.Sprintf("approve: --edit holds %q, the mark of a hidden value, which the tool would get as the value; give the real value, or edit the approval in the console, which keeps hidden values", belay.Redacted)}
		}
		d.Choice, d.EditedArgs = belay.Edit, json.RawMessage(edit)
	}
	if verb == "reject" && *note == "" {
		return usageError{"reject needs --note: the model explains it to the customer"}
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	op := belay.NewOperator(st)
	if d.Choice == belay.Edit {
		if op, err = editingOperator(ctx, st, configPath, id); err != nil {
			return err
		}
	}
	a, err := op.Decide(ctx, belay.AnyTenant, id, d)
	switch {
	case errors.Is(err, belay.ErrApprovalNotFound):
		return fmt.Errorf("%w (list pending approvals with: belay approvals %s)", err, db)
	case errors.Is(err, store.ErrDecided):
		return fmt.Errorf("%w; nothing was changed", err)
	case errors.Is(err, belay.ErrInvalidEdit):
		return fmt.Errorf("approve %s: %s; nothing was recorded", id, strings.TrimPrefix(err.Error(), "decide: "))
	case err != nil:
		return err
	}
	if *asJSON {
		run, err := st.GetRun(ctx, a.Tenant, a.RunID)
		if err != nil {
			return fmt.Errorf("approval %s: %w", a.ID, err)
		}
		return writeJSON(stdout, newApprovalJSON(redactApproval(a, run)))
	}
	fmt.Fprintf(stdout, "approval %s %s by %s; run %s continues on the next worker\n", a.ID, a.Status, a.DecidedBy, a.RunID)
	return nil
}

// editingOperator is an operator that knows the tools of the agents belay
// serve runs (the support desk's, or those of the agents file), so an edit
// is checked against its tool's schema before it is recorded, as the API
// checks it. An edit of a tool it does not know is refused, as the API
// refuses it: unchecked, the call would fail only when it runs.
func editingOperator(ctx context.Context, st store.Store, configPath, id string) (*belay.Operator, error) {
	var agents []*belay.Agent
	if configPath != "" {
		f, err := config.Load(configPath)
		if err != nil {
			return nil, err
		}
		// The agents are built, MCP tools listed, only to know their
		// tools' schemas.
		var closeMCP func() error
		if agents, closeMCP, err = f.Build(ctx, buildModel); err != nil {
			return nil, err
		}
		defer closeMCP()
	} else {
		// The support agent's tools do not depend on its world.
		agents = []*belay.Agent{support.NewAgent(nil, scripted.Func(support.Script()))}
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: agents})
	if err != nil {
		return nil, err
	}
	a, err := st.GetApproval(ctx, belay.AnyTenant, id)
	if err != nil {
		// Decide says what is wrong with the id.
		return rt.Operator(), nil
	}
	run, err := st.GetRun(ctx, a.Tenant, a.RunID)
	if err != nil {
		return nil, fmt.Errorf("approval %s: %w", a.ID, err)
	}
	if !rt.Serves(run.Agent, a.Tool) {
		where := "the support desk's agent"
		if configPath != "" {
			where = "the agents of " + configPath
		}
		return nil, fmt.Errorf("approve %s: tool %s of agent %s is not among %s, so the edit cannot be checked against it; pass --config with the agents file belay serve runs, or approve or reject it as it is", a.ID, a.Tool, run.Agent, where)
	}
	return rt.Operator(), nil
}

// approvalJSON is an approval as --json prints it: the API's fields
// (GET /v1/approvals), and the tenant and what identifies the call.
type approvalJSON struct {
	ID            string               `json:"id"`
	Tenant        string               `json:"tenant"`
	RunID         string               `json:"run_id"`
	Step          int                  `json:"step"`
	ToolUseID     string               `json:"tool_use_id"`
	Tool          string               `json:"tool"`
	Args          json.RawMessage      `json:"args"`
	ArgsHash      string               `json:"args_hash"`
	Summary       string               `json:"summary"`
	Reason        string               `json:"reason"`
	Category      string               `json:"category"`
	PolicyVersion string               `json:"policy_version"`
	Binding       string               `json:"binding"`
	SelfApproval  bool                 `json:"self_approval"`
	Status        store.ApprovalStatus `json:"status"`
	ExpiresAt     time.Time            `json:"expires_at"`
	CreatedAt     time.Time            `json:"created_at"`
	EditedArgs    json.RawMessage      `json:"edited_args,omitempty"`
	DecidedBy     string               `json:"decided_by,omitempty"`
	DecidedAt     *time.Time           `json:"decided_at,omitempty"`
	Note          string               `json:"note,omitempty"`
	// ParentDid is, on a fork's approval, the parent's equal effect.
	ParentDid *parentDidJSON `json:"parent_did,omitempty"`
}

// parentDidJSON is the API's parent_did.
type parentDidJSON struct {
	RunID string `json:"run_id"`
	Key   string `json:"key"`
	Step  int    `json:"step"`
	State string `json:"state"`
}

func newApprovalJSON(a store.Approval) approvalJSON {
	v := approvalJSON{
		ID: a.ID, Tenant: a.Tenant, RunID: a.RunID, Step: a.Step, ToolUseID: a.ToolUseID, Tool: a.Tool,
		Args: jsonValue(a.Args), ArgsHash: a.ArgsHash, Summary: a.Summary, Reason: a.Reason, Category: a.Category,
		PolicyVersion: a.PolicyVersion, Binding: a.Binding, SelfApproval: a.SelfApproval, Status: a.Status,
		ExpiresAt: a.ExpiresAt.UTC(), CreatedAt: a.CreatedAt.UTC(),
		DecidedBy: a.DecidedBy, DecidedAt: optionalTime(a.DecidedAt), Note: a.Note,
	}
	if len(a.EditedArgs) > 0 {
		v.EditedArgs = jsonValue(a.EditedArgs)
	}
	if pe := a.ParentEffect; pe != nil {
		v.ParentDid = &parentDidJSON{RunID: pe.RunID, Key: pe.Key, Step: pe.Step, State: string(pe.State)}
	}
	return v
}

// redactApproval hides the values of the arguments its run recorded as
// secret: the CLI has no agent code to tell them by.
func redactApproval(a store.Approval, run store.Run) store.Approval {
	a.Args = belay.RedactStoredArgs(run, a.Tool, a.Args)
	if len(a.EditedArgs) > 0 {
		a.EditedArgs = belay.RedactStoredArgs(run, a.Tool, a.EditedArgs)
	}
	return a
}
