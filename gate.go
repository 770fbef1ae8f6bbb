package belay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/internal/redact"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// The approval gate: every tool call of a turn passes the agent's policy
// here, in the dispatcher, so a new tool is gated by default. A call that
// needs a person is persisted as a pending approval, bound to its exact
// arguments, and the run lets go; a decision taken is applied here when the
// turn runs again. The decisions themselves are approval.go's.

// gatedCall is one tool call after the policy: either it runs (with the
// arguments a person may have edited) or its result is already decided.
type gatedCall struct {
	use    model.Block
	result *model.Block
}

// gate applies the agent's policy to every call of a turn. If any call needs
// a person's decision that has not been taken, none of the turn runs: the
// pending approvals are persisted, the approvers notified through the outbox
// and the run let go, all in one transaction; gate then returns errStop.
func (x *execution) gate(ctx context.Context, uses []model.Block) ([]gatedCall, error) {
	calls := make([]gatedCall, len(uses))
	var needs []int
	decisions := make([]Decision, len(uses))
	parents := make([]*store.ParentEffect, len(uses))
	var fork *forkLedgers
	var prior []PriorEffect
	priorLoaded := false
	for i, use := range uses {
		calls[i].use = use
		tool, ok := x.agent.tools[use.Name]
		if !ok || tool.checkArgs(use.Input) != nil || x.run.DryRun {
			continue // callTool answers these; a dry run executes nothing to gate
		}
		if tool.Effect.SideEffecting() && !priorLoaded {
			var err error
			if prior, err = x.priorEffects(ctx); err != nil {
				return nil, err
			}
			priorLoaded = true
		}
		d, err := x.agent.Policy(ctx, PolicyCall{Tool: tool.Name, Effect: tool.Effect, External: tool.External,
			Args: use.Input, Run: x.info(), Prior: prior, Now: x.r.cfg.now(), Ledger: x.ledger()})
		if err != nil {
			return nil, &hookError{fmt.Errorf("policy for %s: %w", tool.Name, err)}
		}
		if x.guard.Fork != nil && tool.Effect.SideEffecting() {
			var answered bool
			if d, parents[i], answered, err = x.forkGate(ctx, &fork, tool, use, d); err != nil {
				return nil, err
			}
			if answered {
				continue // its ledger answers it, from the parent's effect
			}
		}
		if d.Verdict == NeedsApproval && !x.r.cfg.HumanApproval {
			d = Decision{Verdict: Deny, Category: d.Category,
				Reason: d.Reason + "; it needs a person's approval and no approver is configured"}
		}
		decisions[i] = d
		if tool.Effect.SideEffecting() && (d.Verdict == Allow || d.Verdict == NeedsApproval) {
			// The calls after it in the turn are judged with it counted: a
			// total is not escaped by asking for many small ones at once.
			// Clipped, so no earlier call's Prior changes under it.
			prior = append(slices.Clip(prior), PriorEffect{Tool: tool.Name, Args: use.Input})
		}
		switch d.Verdict {
		case Allow:
		case Deny:
			blk := x.refuse(use, fmt.Sprintf("Not allowed by policy: %s. Nothing was executed. Do not retry it; explain to the customer or escalate.", d.Reason))
			calls[i].result = &blk
		case NeedsApproval:
			needs = append(needs, i)
		default:
			return nil, &hookError{fmt.Errorf("policy for %s returned verdict %q; want allow, deny or needs_approval", tool.Name, d.Verdict)}
		}
	}
	if len(needs) == 0 {
		return calls, nil
	}

	existing, err := x.r.store.Approvals(ctx, store.ListApprovalsParams{Tenant: x.run.Tenant, RunID: x.run.ID})
	if err != nil {
		return nil, err
	}
	byCall := map[string]store.Approval{}
	for _, a := range existing {
		byCall[a.Tool+"\x00"+a.ArgsHash] = a
	}
	var missing []store.Approval
	waiting := false
	for _, i := range needs {
		use := calls[i].use
		hash, err := argsHash(use.Input)
		if err != nil {
			return nil, err
		}
		a, ok := byCall[use.Name+"\x00"+hash]
		switch {
		case !ok:
			a := x.newApproval(use, hash, decisions[i])
			a.ParentEffect = parents[i]
			missing = append(missing, a)
			waiting = true
		case a.Status == store.ApprovalPending:
			waiting = true
		default:
			calls[i] = x.applyDecision(use, hash, a)
		}
	}
	if waiting {
		return nil, x.awaitApproval(ctx, missing)
	}
	return calls, nil
}

// priorEffects lists the side effects the run applied before this turn,
// from the ledger.
func (x *execution) priorEffects(ctx context.Context) ([]PriorEffect, error) {
	effects, err := x.r.store.Effects(ctx, x.run.Tenant, x.run.ID)
	if err != nil {
		return nil, err
	}
	var prior []PriorEffect
	for _, e := range effects {
		// A turn run again (after a crash, or once a person resolved an
		// unknown outcome) finds its own effects in the ledger; counted,
		// they would make the policy ask about, or refuse, calls it allowed
		// the first time, and already made.
		if e.State == store.EffectDone && e.Step < x.run.Step {
			prior = append(prior, PriorEffect{Tool: e.Tool, Args: e.Args})
		}
	}
	return prior, nil
}

// newApproval builds the pending approval of one call, bound to its exact
// arguments, the policy version and its expiry.
func (x *execution) newApproval(use model.Block, hash string, d Decision) store.Approval {
	tool := x.agent.tools[use.Name]
	expires := x.r.cfg.now().Add(x.r.cfg.ApprovalTTL).UTC()
	summary := fmt.Sprintf("%s with %s", tool.Name, compactJSON(tool.redact(use.Input)))
	if tool.Summarize != nil {
		summary = tool.Summarize(use.Input)
	}
	category := d.Category
	if category == "" {
		category = tool.Name
	}
	// The approval keeps the call's arguments redacted: the exact ones are
	// in the run's messages, which an edit restores hidden values from, and
	// the hash binds the decision to them.
	return store.Approval{
		ID: newApprovalID(), Tenant: x.run.Tenant, RunID: x.run.ID, Step: x.run.Step,
		ToolUseID: use.ID, Tool: tool.Name, Args: tool.redact(use.Input), ArgsHash: hash,
		Reason: d.Reason, Category: category, Summary: summary,
		PolicyVersion: x.agent.PolicyVersion,
		Binding:       binding(x.run.Tenant, x.run.ID, tool.Name, hash, x.agent.PolicyVersion, expires),
		SelfApproval:  d.SelfApproval,
		Status:        store.ApprovalPending, ExpiresAt: expires,
	}
}

// awaitApproval persists the missing approvals with their notifications and
// lets go of the run: no goroutine, no memory is held while a person thinks.
func (x *execution) awaitApproval(ctx context.Context, missing []store.Approval) error {
	for _, a := range missing {
		x.emit(store.EventApprovalRequested, store.ApprovalRequestedData{ApprovalID: a.ID, Tool: a.Tool, Args: x.agent.tools[a.Tool].redact(a.Args),
			Category: a.Category, Reason: a.Reason, Summary: a.Summary, ExpiresAt: a.ExpiresAt})
		payload, _ := json.Marshal(map[string]any{"approval_id": a.ID, "run_id": a.RunID, "tenant": a.Tenant,
			"tool": a.Tool, "summary": a.Summary, "reason": a.Reason, "category": a.Category,
			"expires_at": a.ExpiresAt, "context": x.run.Input})
		x.outbox = append(x.outbox, store.OutboxMessage{Kind: "approval_requested", Payload: payload})
	}
	x.run.Status = store.StatusWaitingApproval
	x.run.StopReason, x.run.StopDetail = "waiting_approval", fmt.Sprintf("%d approval(s) requested", len(missing))
	x.emit(store.EventStop, store.StopData{Status: x.run.Status, Reason: "waiting_approval"})
	if err := x.write(ctx, nil, withRelease(), withApprovals(missing)); err != nil {
		return err
	}
	return errStop
}

func withApprovals(as []store.Approval) writeOption {
	return func(p *store.CheckpointParams) { p.Approvals = as }
}

// applyDecision turns a person's decision into what the turn does with the
// call. A decision is honoured only for the call it was made for: if the
// arguments, the policy version or the expiry differ from what was
// approved, the call does not run.
func (x *execution) applyDecision(use model.Block, hash string, a store.Approval) gatedCall {
	x.emit(store.EventApprovalApplied, store.ApprovalAppliedData{ApprovalID: a.ID, Status: a.Status, By: a.DecidedBy})
	if a.Status == store.ApprovalApproved || a.Status == store.ApprovalEdited {
		want := binding(x.run.Tenant, x.run.ID, use.Name, hash, x.agent.PolicyVersion, a.ExpiresAt)
		if a.ArgsHash != hash || a.Binding != want {
			// Asked again, the same call would find this same approval (one
			// per run, tool and arguments): the way on is a person.
			blk := x.refuse(use, fmt.Sprintf("This call was approved under another policy (version %q; the policy is now %q), so the approval no longer holds. Nothing was executed. Do not call it again; escalate to a person.", a.PolicyVersion, x.agent.PolicyVersion))
			return gatedCall{use: use, result: &blk}
		}
	}
	switch a.Status {
	case store.ApprovalApproved:
		return gatedCall{use: use}
	case store.ApprovalEdited:
		// What the editor left as Redacted comes back from the call.
		edited := use
		edited.Input = redact.Restore(a.EditedArgs, use.Input)
		return gatedCall{use: edited}
	case store.ApprovalRejected:
		note := a.Note
		if note == "" {
			note = "not given"
		}
		blk := x.refuse(use, fmt.Sprintf("A human reviewer (%s) rejected this action. Reason: %s. The action was NOT executed. "+
			"Explain this to the customer politely and offer alternatives; do not retry it or say it was done.", a.DecidedBy, note))
		return gatedCall{use: use, result: &blk}
	default: // expired
		blk := x.refuse(use, "Approval timed out. Escalate to a human agent.")
		return gatedCall{use: use, result: &blk}
	}
}

// refuse answers a call that was not executed, with its trace events.
func (x *execution) refuse(use model.Block, msg string) model.Block {
	x.emit(store.EventToolCall, store.ToolCallData{ID: use.ID, Tool: use.Name, Args: x.agent.tools[use.Name].redact(use.Input)})
	return x.toolError(use, msg)
}

// argsHash is the hash of a call's canonical arguments: what an approval is
// bound to.
func argsHash(args json.RawMessage) (string, error) {
	c, err := ledger.Canonical(args, nil)
	if err != nil {
		return "", err
	}
	return ledger.Hash(c), nil
}

// binding is what a decision must name: the tenant, the run, the tool, the
// canonical arguments, the policy version and the expiry.
func binding(tenant, runID, tool, argsHash, policyVersion string, expires time.Time) string {
	return ledger.Hash([]byte(strings.Join([]string{tenant, runID, tool, argsHash, policyVersion,
		expires.UTC().Format(time.RFC3339Nano)}, "\x00")))
}

func newApprovalID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "ap_" + hex.EncodeToString(b[:])
}
