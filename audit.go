package belay

import (
	"context"
	"fmt"
	"time"

	"github.com/belayrun/belay/store"
)

// PolicyApproval is an irreversible side effect that ran because a policy
// approved it (a decider named policy:<name>), not a person: what an
// evaluator that "fails runs approved by an automatic policy" fails.
type PolicyApproval struct {
	RunID      string
	Tenant     string
	Agent      string
	RunStatus  store.Status
	ApprovalID string
	Tool       string
	Category   string
	// DecidedBy is the policy that approved, as policy:<name>.
	DecidedBy string
	DecidedAt time.Time
	// Key and State are the effect's in the run's ledger: done when it
	// landed, unknown when it may have.
	Key   string
	State store.EffectState
}

// PolicyApprovals lists the irreversible side effects of a tenant's runs
// (AnyTenant: every tenant's) created since since (zero: all) that ran on
// a policy's approval rather than a person's, oldest run first. A tool's
// effect class is read from the run's trace, as its worker recorded it.
func (op *Operator) PolicyApprovals(ctx context.Context, tenant string, since time.Time) ([]PolicyApproval, error) {
	approvals, err := op.store.Approvals(ctx, store.ListApprovalsParams{Tenant: tenant})
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	byRun := map[string][]store.Approval{}
	var order []string
	for _, a := range approvals {
		if !policyDecider(a.DecidedBy) || (a.Status != store.ApprovalApproved && a.Status != store.ApprovalEdited) {
			continue
		}
		if _, ok := byRun[a.RunID]; !ok {
			order = append(order, a.RunID)
		}
		byRun[a.RunID] = append(byRun[a.RunID], a)
	}
	var out []PolicyApproval
	for _, runID := range order {
		run, err := op.store.GetRun(ctx, tenant, runID)
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if !since.IsZero() && run.CreatedAt.Before(since) {
			continue
		}
		irreversible, err := op.irreversibleTools(ctx, runID)
		if err != nil {
			return nil, err
		}
		effects, err := op.store.Effects(ctx, run.Tenant, runID)
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		for _, a := range byRun[runID] {
			if !irreversible[a.Tool] {
				continue
			}
			hash := a.ArgsHash
			if a.Status == store.ApprovalEdited {
				hash = a.EditedHash
			}
			for _, e := range effects {
				if e.Tool != a.Tool || e.ArgsHash != hash || (e.State != store.EffectDone && e.State != store.EffectUnknown && e.State != store.EffectPending) {
					continue
				}
				out = append(out, PolicyApproval{RunID: run.ID, Tenant: run.Tenant, Agent: run.Agent, RunStatus: run.Status,
					ApprovalID: a.ID, Tool: a.Tool, Category: a.Category, DecidedBy: a.DecidedBy, DecidedAt: a.DecidedAt,
					Key: e.Key, State: e.State})
			}
		}
	}
	return out, nil
}

// irreversibleTools are the tools the run's trace records as irreversible.
func (op *Operator) irreversibleTools(ctx context.Context, runID string) (map[string]bool, error) {
	events, err := op.store.Events(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	tools := map[string]bool{}
	for _, ev := range events {
		if ev.Type != store.EventToolCall {
			continue
		}
		d, err := store.DecodeEvent[store.ToolCallData](ev)
		if err == nil && d.Effect == string(Irreversible) {
			tools[d.Tool] = true
		}
	}
	return tools, nil
}
