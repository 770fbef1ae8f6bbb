package store

import (
	"encoding/json"
	"time"
)

// The catalogue of trace events starts here: each kind by its name and the
// struct its data encodes. Only the kinds a store itself writes are here so
// far; the engine's own are built in package belay.

// EventApprovalExpired is the event written when an approval expires
// without a decision. Its data is an ApprovalExpiredData.
const EventApprovalExpired = "approval_expired"

// ApprovalExpiredData is what an approval_expired event records: which
// approval, of which category and tool, and who decided it (ExpiryDecider).
// Exporters count it with the other decisions of its category.
type ApprovalExpiredData struct {
	ApprovalID string `json:"approval_id"`
	By         string `json:"by"`
	Category   string `json:"category"`
	Tool       string `json:"tool"`
}

// ExpiryDecider is the decider recorded on an approval that expired: a
// policy's name, so statistics keep it apart from people's decisions.
const ExpiryDecider = "policy:expiry"

// ExpiryDecision is the decision that expires a, pending past its expiry at
// now, with the approval_expired event to append in the same transaction.
// Every driver's ExpireDueApprovals decides through it, so that an expiry
// reads the same whichever store wrote it.
func ExpiryDecision(a Approval, now time.Time) DecideParams {
	data, _ := json.Marshal(ApprovalExpiredData{ApprovalID: a.ID, By: ExpiryDecider, Category: a.Category, Tool: a.Tool})
	return DecideParams{
		Tenant: a.Tenant, ID: a.ID, Binding: a.Binding, Status: ApprovalExpired,
		By: ExpiryDecider, Note: "no decision before the approval expired", Now: now,
		Events: []Event{{RunID: a.RunID, Step: a.Step, Type: EventApprovalExpired, Time: now, Data: data}},
	}
}
