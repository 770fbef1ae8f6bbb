package belay

import (
	"context"
	"encoding/json"
	"time"
)

// Verdict is what a policy decides about one tool call.
type Verdict string

const (
	// Allow runs the call.
	Allow Verdict = "allow"
	// Deny refuses it; the model is told why and that nothing ran.
	Deny Verdict = "deny"
	// NeedsApproval pauses the run until a person approves, edits or rejects
	// the call.
	NeedsApproval Verdict = "needs_approval"
)

// Decision is a policy's verdict with what a person (or the model) reads
// about it.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	// Reason says why, in plain words: "refunds above 50 USD need approval".
	Reason string `json:"reason,omitempty"`
	// Category groups decisions for approval statistics: "refund_large".
	Category string `json:"category,omitempty"`
	// SelfApproval lets the person who requested the run decide this
	// approval. By default a requester cannot approve their own run's
	// actions.
	SelfApproval bool `json:"self_approval,omitempty"`
}

// PolicyCall is what a policy sees of a tool call.
type PolicyCall struct {
	Tool     string
	Effect   EffectClass
	External bool
	// Args are the exact arguments the call would run with.
	Args json.RawMessage
	Run  RunInfo
	// Prior lists the side effects the run applied before this turn, and
	// those of this turn's earlier calls that the policy let through or sent
	// to a person, so a policy can gate on totals ("refunds in this run
	// above 500 USD"), not only on one call: a model talked into many small
	// refunds, at once or one after another, meets the gate too.
	Prior []PriorEffect
	// Now is when the call is judged, by the runtime's clock: the end of a
	// window a total is taken over.
	Now time.Time
	// Ledger reads the side effects other runs of the tenant recorded, so
	// that a policy can total them over a window ("at most 500 USD
	// refunded per customer per day"), read from the store every worker
	// shares. Nil when the store keeps no such history.
	Ledger EffectLedger
}

// EffectLedger reads the side effects a tenant's other runs recorded.
type EffectLedger interface {
	// Recent returns the effects of tool begun at or after since, in the
	// tenant's runs other than the one asking, that happened, may have or
	// may yet (failed ones are left out), oldest first.
	Recent(ctx context.Context, tool string, since time.Time) ([]RecordedEffect, error)
}

// RecordedEffect is a side effect another run recorded.
type RecordedEffect struct {
	RunID string
	// User is the user (the customer) of its run.
	User string
	Args json.RawMessage
	At   time.Time
}

// PriorEffect is a side effect a run has applied.
type PriorEffect struct {
	Tool string
	Args json.RawMessage
}

// Policy decides every tool call before it runs. It is applied by the
// dispatcher, not by the tools, so a new tool is gated by default instead of
// by remembering to.
type Policy func(ctx context.Context, call PolicyCall) (Decision, error)

// DefaultPolicy gates what cannot be undone and what reaches a customer, and
// allows the rest: irreversible tools and tools marked External need
// approval.
func DefaultPolicy(ctx context.Context, call PolicyCall) (Decision, error) {
	switch {
	case call.Effect == Irreversible:
		return Decision{Verdict: NeedsApproval, Reason: call.Tool + " cannot be undone", Category: call.Tool}, nil
	case call.External:
		return Decision{Verdict: NeedsApproval, Reason: call.Tool + " reaches a customer", Category: call.Tool}, nil
	}
	return Decision{Verdict: Allow}, nil
}
