package belay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// approvalsOnly is a store that knows only a fixed list of approvals.
type approvalsOnly struct {
	store.Store
	list []store.Approval
}

func (s approvalsOnly) Approvals(ctx context.Context, p store.ListApprovalsParams) ([]store.Approval, error) {
	return s.list, nil
}

func TestApprovalStatsSuggestWhereToGrantAutonomy(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	var list []store.Approval
	add := func(category string, status store.ApprovalStatus, n int, wait time.Duration) {
		for range n {
			list = append(list, store.Approval{Category: category, Status: status, CreatedAt: t0, DecidedAt: t0.Add(wait)})
		}
	}
	add("refund_small", store.ApprovalApproved, 39, 2*time.Minute)
	add("refund_small", store.ApprovalEdited, 1, 10*time.Minute)
	add("bulk_close", store.ApprovalRejected, 4, time.Hour)
	add("bulk_close", store.ApprovalApproved, 6, 3*time.Hour)
	add("bulk_close", store.ApprovalPending, 2, 0)
	add("delete_account", store.ApprovalExpired, 1, 4*time.Hour)

	stats, err := ApprovalStats(context.Background(), approvalsOnly{list: list}, "")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]CategoryStats{}
	for _, s := range stats {
		by[s.Category] = s
	}
	small := by["refund_small"]
	if small.Decided != 40 || small.ApprovalRate != 39.0/40 || small.EditRate != 1.0/40 || small.MedianDecision != 2*time.Minute ||
		!strings.Contains(small.Suggestion, "higher auto-approve threshold") {
		t.Errorf("refund_small %+v", small)
	}
	bulk := by["bulk_close"]
	if bulk.Pending != 2 || bulk.Decided != 10 || bulk.RejectionRate != 0.4 || bulk.MedianDecision != 3*time.Hour ||
		!strings.Contains(bulk.Suggestion, "weak here") {
		t.Errorf("bulk_close %+v", bulk)
	}
	if del := by["delete_account"]; del.Expired != 1 || del.MedianDecision != 0 || del.Suggestion != "" {
		t.Errorf("delete_account %+v: an expiry is no decision time and too few to suggest", del)
	}
	if stats[0].Category != "bulk_close" || stats[2].Category != "refund_small" {
		t.Errorf("not ordered by category: %v", stats)
	}
}
