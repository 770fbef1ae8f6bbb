package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// ApprovalStatus is where an approval is.
type ApprovalStatus string

const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalEdited   ApprovalStatus = "edited"
	ApprovalRejected ApprovalStatus = "rejected"
	ApprovalExpired  ApprovalStatus = "expired"
)

// Approval is an action of a run that waits, or waited, for a person.
type Approval struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	Step  int    `json:"step"`
	Tool  string `json:"tool"`
	// Args are the call's exact arguments, sensitive fields redacted.
	Args json.RawMessage `json:"args"`
	// Summary says what the call does, in plain words.
	Summary string `json:"summary"`
	// Reason says why the policy asks a person.
	Reason        string `json:"reason"`
	Category      string `json:"category"`
	PolicyVersion string `json:"policy_version"`
	// Binding is what a decision names, so that it holds only for what
	// the approver saw.
	Binding    string          `json:"binding"`
	Status     ApprovalStatus  `json:"status"`
	ExpiresAt  time.Time       `json:"expires_at"`
	CreatedAt  time.Time       `json:"created_at"`
	EditedArgs json.RawMessage `json:"edited_args,omitempty"`
	DecidedBy  string          `json:"decided_by,omitempty"`
	DecidedAt  *time.Time      `json:"decided_at,omitempty"`
	Note       string          `json:"note,omitempty"`
	// ParentDid, on an approval of a fork's call, is the equal side effect
	// the fork's parent recorded: the parent did this already.
	ParentDid *ParentDid `json:"parent_did,omitempty"`
}

// ApprovalFilter selects the approvals Approvals lists. The zero value
// lists the latest 100 of every status.
type ApprovalFilter struct {
	Status ApprovalStatus
	RunID  string
	// Limit is how many, 1 to 1000. Default 100.
	Limit int
}

// Approvals lists approvals of the key's tenant, newest first.
func (c *Client) Approvals(ctx context.Context, f ApprovalFilter) ([]Approval, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if f.RunID != "" {
		q.Set("run", f.RunID)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Approvals []Approval `json:"approvals"`
	}
	err := c.call(ctx, get("/v1/approvals", q), &out)
	return out.Approvals, err
}

// GetApproval returns an approval of the key's tenant.
func (c *Client) GetApproval(ctx context.Context, id string) (Approval, error) {
	var a Approval
	err := c.call(ctx, get("/v1/approvals/"+escape(id), nil), &a)
	return a, err
}

// Verdict is what a decision says.
type Verdict string

const (
	Approve Verdict = "approve"
	// Edit approves the call with other arguments.
	Edit   Verdict = "edit"
	Reject Verdict = "reject"
)

// Decision decides an approval.
type Decision struct {
	Verdict Verdict `json:"decision"`
	// Binding is the approval's, copied from the approval decided.
	Binding string `json:"binding"`
	// Arguments are an edit's: the JSON object the call runs with. A
	// value left "[redacted]" keeps the original.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Note says why; a rejection needs one, and the agent reads it.
	Note string `json:"note,omitempty"`
}

// Decide records the key holder's decision on an approval. It is sent
// once: a decision that arrived and is sent again answers
// ErrAlreadyDecided. The person who started the run gets ErrSelfApproval
// unless the policy allows it; a binding that is not the approval's gets
// ErrBindingMismatch.
func (c *Client) Decide(ctx context.Context, approvalID string, d Decision) (Approval, error) {
	var a Approval
	err := c.call(ctx, post("/v1/approvals/"+escape(approvalID)+"/decision", d), &a)
	return a, err
}

// CategoryStats is how one category of approvals was decided: the counts,
// rates and median over every decider, and split by people and policies.
type CategoryStats struct {
	Category string `json:"category"`
	Pending  int    `json:"pending"`
	DeciderStats
	// Suggestion is what people's decisions suggest, if anything.
	Suggestion string       `json:"suggestion,omitempty"`
	People     DeciderStats `json:"people"`
	Policy     DeciderStats `json:"policy"`
}

// DeciderStats counts decisions; the rates are shares of Decided.
type DeciderStats struct {
	Decided        int           `json:"decided"`
	Approved       int           `json:"approved"`
	Edited         int           `json:"edited"`
	Rejected       int           `json:"rejected"`
	Expired        int           `json:"expired"`
	ApprovalRate   float64       `json:"approval_rate"`
	EditRate       float64       `json:"edit_rate"`
	RejectionRate  float64       `json:"rejection_rate"`
	MedianDecision time.Duration `json:"median_decision_ns"`
	// By counts each policy's decisions, by its name (Policy only).
	By map[string]int `json:"by,omitempty"`
}

// ApprovalStats returns, per category, how the tenant's approvals were
// decided.
func (c *Client) ApprovalStats(ctx context.Context) ([]CategoryStats, error) {
	var out struct {
		Categories []CategoryStats `json:"categories"`
	}
	err := c.call(ctx, get("/v1/stats/approvals", nil), &out)
	return out.Categories, err
}
