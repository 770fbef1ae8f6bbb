package belay

import (
	"context"
	"maps"
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

// Decisions a policy takes (the demo's auto-approval, the expiry) say
// nothing about how people judge the agent: a category a policy approves
// all day is no candidate for autonomy on that account.
func TestApprovalStatsKeepPolicyDecisionsApart(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	var list []store.Approval
	for range 40 {
		list = append(list, store.Approval{Category: "refund", Status: store.ApprovalApproved, DecidedBy: "policy:demo-auto",
			CreatedAt: t0, DecidedAt: t0})
	}
	list = append(list,
		store.Approval{Category: "refund", Status: store.ApprovalApproved, DecidedBy: "human:maya", CreatedAt: t0, DecidedAt: t0.Add(time.Minute)},
		store.Approval{Category: "refund", Status: store.ApprovalApproved, DecidedBy: "human:maya", CreatedAt: t0, DecidedAt: t0.Add(3 * time.Minute)},
		store.Approval{Category: "refund", Status: store.ApprovalRejected, DecidedBy: "human:lee", CreatedAt: t0, DecidedAt: t0.Add(5 * time.Minute)},
		store.Approval{Category: "refund", Status: store.ApprovalExpired, DecidedBy: "policy:expiry", CreatedAt: t0, DecidedAt: t0.Add(4 * time.Hour)})
	stats, err := ApprovalStats(context.Background(), approvalsOnly{list: list}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Suggestion != "" {
		t.Fatalf("stats %+v: want no suggestion from 3 decisions by people", stats)
	}
	c := stats[0]
	if c.Decided != 44 || c.Approved != 42 || c.Rejected != 1 || c.Expired != 1 || c.ApprovalRate != 42.0/44 {
		t.Errorf("all deciders %+v: want every decision counted, as before the split", c)
	}
	if p := c.People; p.Decided != 3 || p.Approved != 2 || p.Rejected != 1 || p.Expired != 0 || p.ApprovalRate != 2.0/3 ||
		p.RejectionRate != 1.0/3 || p.MedianDecision != 3*time.Minute || p.By != nil {
		t.Errorf("people %+v: want maya's and lee's decisions only, and no names", p)
	}
	if p := c.Policy; p.Decided != 41 || p.Approved != 40 || p.Expired != 1 || p.MedianDecision != 0 ||
		!maps.Equal(p.By, map[string]int{"policy:demo-auto": 40, "policy:expiry": 1}) {
		t.Errorf("policies %+v: want the auto-approvals and the expiry, by name", p)
	}
}
