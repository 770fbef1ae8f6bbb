package belay

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/belayrun/belay/store"
)

// CategoryStats is how people decided one category of approvals. It is the
// data for granting autonomy one category at a time: a category approved
// nearly always can be gated less, one rejected often shows where the agent
// is weak.
type CategoryStats struct {
	Category string `json:"category"`
	Pending  int    `json:"pending"`
	// Decided counts approved, edited, rejected and expired approvals.
	Decided  int `json:"decided"`
	Approved int `json:"approved"`
	Edited   int `json:"edited"`
	Rejected int `json:"rejected"`
	Expired  int `json:"expired"`
	// The rates are shares of Decided.
	ApprovalRate  float64 `json:"approval_rate"`
	EditRate      float64 `json:"edit_rate"`
	RejectionRate float64 `json:"rejection_rate"`
	// MedianDecision is the median time from request to a person's
	// decision (expiries excluded).
	MedianDecision time.Duration `json:"median_decision_ns"`
	// Suggestion says what the figures suggest, if anything.
	Suggestion string `json:"suggestion,omitempty"`
}

// Thresholds of the suggestions: enough decisions to mean something, and
// rates that stand out.
const (
	suggestMinDecisions   = 20
	suggestApproveRate    = 0.95
	suggestRejectDecided  = 10
	suggestRejectionShare = 0.30
)

// ApprovalStats computes approval statistics per category from the store,
// for a tenant ("" for all), ordered by category.
func ApprovalStats(ctx context.Context, s store.Store, tenant string) ([]CategoryStats, error) {
	approvals, err := s.Approvals(ctx, store.ListApprovalsParams{Tenant: tenant})
	if err != nil {
		return nil, fmt.Errorf("approval stats: %w", err)
	}
	by := map[string]*CategoryStats{}
	waits := map[string][]time.Duration{}
	for _, a := range approvals {
		c, ok := by[a.Category]
		if !ok {
			c = &CategoryStats{Category: a.Category}
			by[a.Category] = c
		}
		switch a.Status {
		case store.ApprovalPending:
			c.Pending++
			continue
		case store.ApprovalApproved:
			c.Approved++
		case store.ApprovalEdited:
			c.Edited++
		case store.ApprovalRejected:
			c.Rejected++
		case store.ApprovalExpired:
			c.Expired++
		}
		c.Decided++
		if a.Status != store.ApprovalExpired {
			waits[a.Category] = append(waits[a.Category], a.DecidedAt.Sub(a.CreatedAt))
		}
	}
	stats := make([]CategoryStats, 0, len(by))
	for cat, c := range by {
		if c.Decided > 0 {
			d := float64(c.Decided)
			c.ApprovalRate = float64(c.Approved) / d
			c.EditRate = float64(c.Edited) / d
			c.RejectionRate = float64(c.Rejected) / d
		}
		if w := waits[cat]; len(w) > 0 {
			slices.Sort(w)
			c.MedianDecision = w[len(w)/2]
			if len(w)%2 == 0 {
				c.MedianDecision = (w[len(w)/2-1] + w[len(w)/2]) / 2
			}
		}
		switch {
		case c.Decided >= suggestMinDecisions && c.ApprovalRate >= suggestApproveRate:
			c.Suggestion = fmt.Sprintf("approved %.0f%% of %d times: a candidate for a higher auto-approve threshold", 100*c.ApprovalRate, c.Decided)
		case c.Decided >= suggestRejectDecided && c.RejectionRate >= suggestRejectionShare:
			c.Suggestion = fmt.Sprintf("rejected %.0f%% of %d times: the agent is weak here; read these runs' traces", 100*c.RejectionRate, c.Decided)
		}
		stats = append(stats, *c)
	}
	slices.SortFunc(stats, func(a, b CategoryStats) int {
		if a.Category < b.Category {
			return -1
		}
		if a.Category > b.Category {
			return 1
		}
		return 0
	})
	return stats, nil
}
